/* backend_cuda.c - the CUDA entry of the backend table: the KV codecs run
 * as kernels/ (or, in a build without nvcc, cuda_stub.c) implements them;
 * the weight codecs have no CUDA kernel, so their entries stay empty and a
 * CUDA context refuses them. */
#include "tq_internal.h"

const tq_kernels tq_kernels_cuda = {"CUDA", NULL, NULL, NULL, NULL, tq_cuda_encode, tq_cuda_decode};
