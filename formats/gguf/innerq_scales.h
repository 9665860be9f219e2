/* innerq_scales.h - InnerQ per-channel K/V scales as files.
 *
 * SCALES.gguf, what `tq calibrate-innerq` writes (formats/gguf/INNERQ.md): per
 * model layer l the F32 tensors blk.l.innerq_k and blk.l.innerq_v shaped
 * [head_dim, n_head] (n_head 1: one vector for every KV head of the layer),
 * general.type "tq-innerq", and tq.innerq.* saying how they were made and
 * for which model.  The older .npy form stays readable: float32 or float16
 * shaped [head_dim] (K and V alike), [2, head_dim] (K, V) or
 * [layers, 2, head_dim]. */
#ifndef TQ_INNERQ_SCALES_H
#define TQ_INNERQ_SCALES_H

#include "gguf.h"

#include <stdint.h>

typedef struct tq_innerq_set {
    uint32_t n_layer, n_head,
        head_dim;               /* n_layer 1 (.npy [head_dim] or [2, head_dim]): every layer */
    float *s;                   /* [layer][K, V][head][channel], finite and positive */
    int has_v;                  /* 0: V was left alone (scales of 1) */
    int has_model;              /* model_fingerprint is known */
    uint64_t model_fingerprint; /* tq_model_fingerprint of the model calibrated for */
    char method[16];            /* "qk", "kv", "fork"; "npy" for the .npy form */
} tq_innerq_set;

/* How a set was made, recorded in SCALES.gguf and in folded models. */
typedef struct tq_innerq_provenance {
    const char *method, *v_method, *per, *pairs, *query_energy, *model_name;
    double strength, clamp_lo, clamp_hi; /* clamp 0: none */
    int pow2;                            /* scales rounded to powers of two */
    uint32_t rope_dims;
    uint64_t tokens; /* cells seen, summed over layers */
    uint32_t n_sources;
    const char *const *sources;    /* file names */
    const uint64_t *source_hashes; /* XXH64 of each file */
} tq_innerq_provenance;

/* Either form, told apart by its first bytes. */
tq_status tq_innerq_set_load(tq_ctx *ctx, const char *path, tq_innerq_set *out);
/* The same from a buffer the caller keeps (fuzzing, tests). */
tq_status tq_innerq_set_load_memory(tq_ctx *ctx, const void *data, size_t size, const char *label,
                                    tq_innerq_set *out);
/* The scales of layer l (clamped to the set's layers), K or V, head h (clamped to its heads). */
const float *tq_innerq_set_at(const tq_innerq_set *s, uint32_t l, int is_v, uint32_t h);
/* Layer l's smallest and largest K (is_v 0) or V scale over its heads. */
void tq_innerq_set_range(const tq_innerq_set *s, uint32_t l, int is_v, float *lo, float *hi);
void tq_innerq_set_free(tq_innerq_set *s);
/* Whether a GGUF file is a scales file (general.type "tq-innerq"). */
int tq_innerq_is_scales(const tq_gguf *g);

/* SCALES.gguf, through a temporary file renamed into place; inputs are never overwritten. */
tq_status tq_innerq_set_write(tq_ctx *ctx, const char *path, const tq_innerq_set *s,
                              const tq_innerq_provenance *p, const char *const *inputs,
                              size_t n_inputs);
/* The provenance keys alone (tq.innerq.*), for a folded model's header. */
tq_status tq_innerq_provenance_write(tq_gguf_writer *w, const tq_innerq_set *s,
                                     const tq_innerq_provenance *p);

#endif
