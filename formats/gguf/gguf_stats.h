/* gguf_stats.h - what a GGUF model's tensors hold, in numbers: each tensor's value
 * statistics over its dequantized values, and the totals by type (`tq inspect`). */
#ifndef TQ_GGUF_STATS_H
#define TQ_GGUF_STATS_H

#include "gguf.h"

/* A tensor's values (have 0: its type has no decoder here). */
typedef struct tq_gguf_stats {
    int have;
    double min, max, rms, kurtosis;
    double beyond6; /* the share of values beyond 6 RMS */
    uint64_t n;
} tq_gguf_stats;

/* Tensor i's statistics on `threads` threads (the same for any count); TQ_ERR_NOMEM, or the
 * dequantizer's error, through ctx. */
tq_status tq_gguf_tensor_stats(tq_ctx *ctx, const tq_gguf *g, int64_t i, int threads,
                               tq_gguf_stats *out);

/* Every tensor's statistics into st[n_tensors], one tensor after another on `threads` threads
 * (on_tensor, if given, before each); *bytes: the tensor bytes that had a decoder. */
tq_status tq_gguf_stats_all(tq_ctx *ctx, const tq_gguf *g, int threads, tq_gguf_stats *st,
                            double *bytes,
                            void (*on_tensor)(void *user, int64_t i, int64_t n, const char *name),
                            void *user);

/* One tensor type's share of a model. */
typedef struct tq_gguf_type_total {
    const char *name;
    int64_t tensors;
    double weights, bytes;
} tq_gguf_type_total;

/* The model's weights and tensor bytes, and by type (in the order the types first appear; at
 * most max types, the rest left out of by_type alone): *n_types. */
typedef struct tq_gguf_totals {
    double weights, bytes;
    tq_gguf_type_total by_type[64];
    int n_types;
} tq_gguf_totals;
void tq_gguf_totals_of(const tq_gguf *g, tq_gguf_totals *t);

/* Where the type-id profile came from: "file" (tq.type_profile), "option" (explicit),
 * "assumed" (ambiguous ids, no record) or "default". */
const char *tq_gguf_profile_source(const tq_gguf *g, int explicit_profile);

#endif
