/*
 * imatrix.h - llama.cpp importance matrices (llama-imatrix output), in both
 * forms: the GGUF file (general.type = "imatrix"; per weight tensor NAME
 * the tensors NAME.in_sum2 [n_per_row, n_mat] and NAME.counts [1, n_mat])
 * and the legacy .dat file.  See IMATRIX.md.
 *
 * What tq uses is, per weight tensor, the mean squared activation of each
 * input column (per expert for 3-D tensors), as llama-quantize does.
 */
#ifndef TQ_IMATRIX_H
#define TQ_IMATRIX_H

#include "tq.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tq_imatrix tq_imatrix;

tq_status tq_imatrix_open(tq_ctx *ctx, const char *path, tq_imatrix **out);
tq_status tq_imatrix_open_memory(tq_ctx *ctx, const void *data, size_t size, const char *label,
                                 tq_imatrix **out);
void tq_imatrix_close(tq_imatrix *m);

uint32_t tq_imatrix_n_entries(const tq_imatrix *m);
const char *tq_imatrix_name(const tq_imatrix *m, uint32_t i);
/* Mean squared activations for a tensor, *n values (n_per_row x n_mat), or
 * NULL if the file has none for it. */
const float *tq_imatrix_get(const tq_imatrix *m, const char *tensor, uint64_t *n);
int tq_imatrix_is_gguf(const tq_imatrix *m);

#ifdef __cplusplus
}
#endif
#endif
