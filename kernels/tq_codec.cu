/* tq_codec.cu - the KV block codecs on CUDA.
 *
 * One thread codes one block with the scalar reference's operation order (the
 * norm sums are sequential in element order, as in the fork), so the GPU
 * writes the CPU's bytes; nvcc runs with -fmad=false and IEEE division and
 * square root.  A CTA first stages its rows through shared memory so the
 * global loads and stores are coalesced; rows are padded by one float so the
 * threads' walks along their own rows do not collide in the same bank. */
extern "C" {
#include "tq_internal.h"
#include "tq_half.h"
#include "tq_fwht.h"
}

#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

namespace
{

struct dev_params {
    uint32_t g, bits, K, norm_correction, layout, block_bytes;
    float scale;
    float s1[512], s2[512];
    float cen[256], thr[256];
};

__device__ uint32_t cb_index(const dev_params *p, float v)
{
    uint32_t k = 0;
    for (uint32_t t = 0; t + 1 < p->K; t++) k += v >= p->thr[t];
    return k;
}

__device__ uint32_t payload_offset(uint32_t layout) { return layout == TQ_LAYOUT_TURBO4 ? 4 : 2; }

/* index j of a block whose indices sit (as floats' bit patterns) in row[] */
__device__ void store_block(const dev_params *p, const uint32_t *idx, uint16_t h, uint8_t *o)
{
    o[0] = (uint8_t)h;
    o[1] = (uint8_t)(h >> 8);
    uint32_t g = p->g;
    if (p->layout == TQ_LAYOUT_TURBO3) {
        for (uint32_t q = 0; q < g / 4; q++) {
            uint32_t v = 0;
            for (int k = 0; k < 4; k++) v |= (idx[4 * q + k] & 3u) << (2 * k);
            o[2 + q] = (uint8_t)v;
        }
        for (uint32_t q = 0; q < g / 8; q++) {
            uint32_t v = 0;
            for (int k = 0; k < 8; k++) v |= ((idx[8 * q + k] >> 2) & 1u) << k;
            o[2 + g / 4 + q] = (uint8_t)v;
        }
        return;
    }
    uint32_t off = payload_offset(p->layout), bits = p->bits, nbytes = g * bits / 8;
    if (off == 4) o[2] = o[3] = 0; /* turbo4 rnorm */
    for (uint32_t q = 0; q < nbytes; q++) {
        uint32_t v = 0;
        for (uint32_t j = 8 * q / bits; j <= (8 * q + 7) / bits && j < g; j++) {
            int sh = (int)(j * bits) - (int)(8 * q);
            v |= sh >= 0 ? idx[j] << sh : idx[j] >> -sh;
        }
        o[off + q] = (uint8_t)v;
    }
}

__device__ uint32_t load_index(const dev_params *p, const uint8_t *in, uint32_t j)
{
    if (p->layout == TQ_LAYOUT_TURBO3)
        return ((in[2 + j / 4] >> (2 * (j % 4))) & 3u) |
               (((in[2 + p->g / 4 + j / 8] >> (j % 8)) & 1u) << 2);
    uint32_t off = payload_offset(p->layout), bit = j * p->bits, b = bit / 8;
    uint32_t v = in[off + b];
    if ((bit % 8) + p->bits > 8) v |= (uint32_t)in[off + b + 1] << 8;
    return (v >> (bit % 8)) & ((1u << p->bits) - 1);
}

__global__ void encode_kernel(const dev_params *p, const float *x, size_t nb, uint8_t *out)
{
    extern __shared__ float sm[];
    const uint32_t g = p->g, stride = g + 1;
    const size_t b0 = (size_t)blockIdx.x * blockDim.x;
    const uint32_t rows = (uint32_t)min((size_t)blockDim.x, nb - b0);
    for (uint32_t i = threadIdx.x; i < rows * g; i += blockDim.x)
        sm[(i / g) * stride + i % g] = x[b0 * g + i];
    __syncthreads();
    if (threadIdx.x < rows) {
        float *u = sm + threadIdx.x * stride;
        float ss = 0.0f;
        for (uint32_t j = 0; j < g; j++) ss += u[j] * u[j];
        float n = sqrtf(ss);
        float inv = n > 1e-10f ? 1.0f / n : 0.0f;
        for (uint32_t j = 0; j < g; j++) u[j] = (u[j] * inv) * p->s1[j];
        tq_fwht_inline(u, g);
        float rs = 0.0f;
        uint32_t *idx = (uint32_t *)u;
        for (uint32_t j = 0; j < g; j++) {
            uint32_t k = cb_index(p, u[j] * (p->scale * p->s2[j]));
            float cv = p->cen[k];
            rs += cv * cv;
            idx[j] = k;
        }
        float recon = sqrtf(rs);
        float nv = n;
        if (p->norm_correction && recon > 1e-10f) nv = n / recon;
        store_block(p, idx, tq_half_from_bits(__float_as_uint(nv)),
                    out + (b0 + threadIdx.x) * p->block_bytes);
    }
}

__global__ void decode_kernel(const dev_params *p, const uint8_t *in, size_t nb, float *y,
                              int rotated)
{
    extern __shared__ float sm[];
    const uint32_t g = p->g, stride = g + 1;
    const size_t b0 = (size_t)blockIdx.x * blockDim.x;
    const uint32_t rows = (uint32_t)min((size_t)blockDim.x, nb - b0);
    if (threadIdx.x < rows) {
        const uint8_t *blk = in + (b0 + threadIdx.x) * p->block_bytes;
        float *v = sm + threadIdx.x * stride;
        float nrm = __uint_as_float(tq_half_to_bits((uint16_t)(blk[0] | blk[1] << 8)));
        for (uint32_t j = 0; j < g; j++) v[j] = p->cen[load_index(p, blk, j)] * nrm;
        if (!rotated) {
            for (uint32_t j = 0; j < g; j++) v[j] *= p->s2[j];
            tq_fwht_inline(v, g);
            for (uint32_t j = 0; j < g; j++) v[j] *= p->scale * p->s1[j];
        }
    }
    __syncthreads();
    for (uint32_t i = threadIdx.x; i < rows * g; i += blockDim.x)
        y[b0 * g + i] = sm[(i / g) * stride + i % g];
}

int fail(char *err, size_t len, const char *what, cudaError_t e)
{
    snprintf(err, len, "%s: %s", what, cudaGetErrorString(e));
    return -1;
}

struct device_job {
    dev_params *p = nullptr;
    void *a = nullptr, *b = nullptr;
    ~device_job()
    {
        cudaFree(p);
        cudaFree(a);
        cudaFree(b);
    }
};

int prepare(const tq_codec *c, dev_params *h, dev_params **d, char *err, size_t len)
{
    memset(h, 0, sizeof *h);
    h->g = c->kv.g;
    h->bits = c->kv.bits;
    h->K = c->kv.cb->size;
    h->norm_correction = c->kv.norm_correction;
    h->layout = (uint32_t)c->layout;
    h->block_bytes = (uint32_t)c->block_bytes;
    h->scale = c->kv.scale;
    memcpy(h->s1, c->kv.s1, h->g * sizeof(float));
    memcpy(h->s2, c->kv.s2, h->g * sizeof(float));
    memcpy(h->cen, c->kv.cen, sizeof h->cen);
    memcpy(h->thr, c->kv.thr, sizeof h->thr);
    cudaError_t e = cudaMalloc((void **)d, sizeof *h);
    if (e == cudaSuccess) e = cudaMemcpy(*d, h, sizeof *h, cudaMemcpyHostToDevice);
    return e == cudaSuccess ? 0 : fail(err, len, "uploading codec parameters", e);
}

/* Rows per CTA: as many as fit 33 KiB of shared memory, at most 64. */
uint32_t rows_per_cta(uint32_t g)
{
    uint32_t r = 8448 / (g + 1);
    return r > 64 ? 64 : r;
}

/* Work is streamed through the GPU in slices so device memory stays bounded. */
const size_t SLICE_VALUES = (size_t)1 << 26;

} // namespace

extern "C" int tq_cuda_built(void) { return 1; }

extern "C" int tq_cuda_devices(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
    return n;
}

/* Streams nb blocks through the GPU in slices: upload a slice of input, run
 * the kernel, download its output. */
static int run_sliced(const tq_codec *c, int encode, int rotated, const void *in, size_t nb,
                      void *out, char *err, size_t errlen)
{
    dev_params h;
    device_job job;
    if (prepare(c, &h, &job.p, err, errlen)) return -1;
    const uint32_t g = c->kv.g, rpc = rows_per_cta(g);
    const size_t fbytes = g * sizeof(float), bbytes = c->block_bytes;
    const size_t in_b = encode ? fbytes : bbytes, out_b = encode ? bbytes : fbytes;
    size_t cap = SLICE_VALUES / g;
    if (nb < cap) cap = nb;
    cudaError_t e = cudaMalloc(&job.a, cap * in_b);
    if (e == cudaSuccess) e = cudaMalloc(&job.b, cap * out_b);
    if (e != cudaSuccess) return fail(err, errlen, "allocating device memory", e);
    for (size_t b0 = 0; b0 < nb; b0 += cap) {
        size_t m = nb - b0 < cap ? nb - b0 : cap;
        e = cudaMemcpy(job.a, (const uint8_t *)in + b0 * in_b, m * in_b, cudaMemcpyHostToDevice);
        if (e != cudaSuccess) return fail(err, errlen, "copying input", e);
        unsigned ctas = (unsigned)((m + rpc - 1) / rpc);
        size_t shm = rpc * (g + 1) * sizeof(float);
        if (encode)
            encode_kernel<<<ctas, rpc, shm>>>(job.p, (const float *)job.a, m, (uint8_t *)job.b);
        else
            decode_kernel<<<ctas, rpc, shm>>>(job.p, (const uint8_t *)job.a, m, (float *)job.b,
                                              rotated);
        e = cudaGetLastError();
        if (e == cudaSuccess)
            e = cudaMemcpy((uint8_t *)out + b0 * out_b, job.b, m * out_b, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess)
            return fail(err, errlen, encode ? "encode kernel" : "decode kernel", e);
    }
    return 0;
}

extern "C" int tq_cuda_encode(const tq_codec *c, const float *x, size_t nb, uint8_t *out, char *err,
                              size_t errlen)
{
    return run_sliced(c, 1, 0, x, nb, out, err, errlen);
}

extern "C" int tq_cuda_decode(const tq_codec *c, const uint8_t *in, size_t nb, float *y,
                              int rotated, char *err, size_t errlen)
{
    return run_sliced(c, 0, rotated, in, nb, y, err, errlen);
}
