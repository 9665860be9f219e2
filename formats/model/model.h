/* model.h - a model's facts as llama.cpp reads them (its hparams), from a GGUF once.
 *
 * Every architecture-prefixed key tq uses ({arch}.block_count, .attention.*, .rope.*) is read
 * by tq_model_read and nowhere else; the rest of tq takes this struct.  Keys and defaults are
 * llama.cpp's (src/llama-model.cpp, src/llama-arch.cpp):
 *   1. general.architecture names the row of arch.c's table;
 *   2. block_count, embedding_length, attention.head_count, attention.head_count_kv (the head
 *      count when absent; an array gives a count per layer, which tq does not handle);
 *   3. attention.key_length / value_length, else embedding_length / head_count;
 *   4. attention.sliding_window, attention.sliding_window_pattern (a bool per layer);
 *   5. rope.dimension_count (else the K head size), rope.freq_base (10000), linear scaling
 *      (rope.scaling.type "linear" with .factor, or the older rope.scale_linear; no RoPE
 *      where the model has rope_freqs.weight, per-pair factors tq does not rebuild), and for the
 *      sliding layers rope.freq_base_swa, else the base llama.cpp fixes for the architecture
 *      (the table's), else the global layers' RoPE;
 *   6. the memory: which layers keep K/V (all; a hybrid's attention layers, by
 *      head_count_kv 0 or by full_attention_interval (4) / attention.recurrent_layers; not
 *      the last attention.shared_kv_layers, which reuse another's; not the
 *      nextn_predict_layers), which a recurrent state, and an MLA latent
 *      (attention.key_length_mla and value_length_mla, deepseek2). */
#ifndef TQ_MODEL_H
#define TQ_MODEL_H

#include "arch.h"
#include "gguf.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tq_model {
    const tq_gguf *gguf;     /* the file the facts come from: its tensors */
    char arch[64];           /* general.architecture ("": none) */
    const tq_arch *row;      /* its row of arch.c's table (NULL: none tq knows of) */
    const tq_arch *kv_row;   /* the row where its KV facts are verified (tq_arch_kv), else NULL */
    uint32_t n_layer;        /* block_count (0: absent) */
    uint32_t n_embd;         /* embedding_length (0: absent) */
    uint32_t n_head;         /* attention.head_count (0: absent) */
    uint32_t n_head_kv;      /* attention.head_count_kv (n_head when absent) */
    int head_kv_per_layer;   /* attention.head_count_kv is an array */
    uint32_t head_k, head_v; /* K's and V's head size (0: the metadata does not say) */
    uint32_t n_rot;          /* rope.dimension_count (head_k when absent) */
    uint32_t swa_window;     /* attention.sliding_window (0: none) */
    uint32_t n_swa_pattern;  /* attention.sliding_window_pattern's length (0: absent) */
    uint8_t *swa_pattern;    /* [n_swa_pattern]: 1 where the layer slides (NULL: bad) */
    int swa_pattern_bad;     /* the pattern is there but not numbers: no split known */
    tq_rope rope, rope_swa;  /* the global and the sliding layers' K RoPE, */
    int rope_known;          /* where tq rebuilds them (no YaRN, LongRoPE, ...) */
    int rope_swa_known;
    int innerq_folded;    /* tq.innerq.folded: InnerQ scales folded in already */
    /* the memory (model.h, 6.): which layers keep K/V in the attention cache(s) */
    uint8_t *kv_layer;   /* [n_layer]: 1 where the layer keeps its own K/V */
    uint32_t n_kv_layer; /* how many do */
    uint32_t n_recurrent;  /* layers with a recurrent state instead (hybrid, recurrent) */
    int mla;               /* K is one latent a cell and there is no V (key_length_mla) */
    uint32_t head_k_swa;   /* the sliding layers' K head size (key_length_swa; 0: head_k) */
    uint64_t fingerprint; /* tq_model_fingerprint */
} tq_model;

/* The facts of g (kept: m->gguf = g).  TQ_ERR_FORMAT for a value out of range
 * (a negative count, a pattern that is not a bool array). */
tq_status tq_model_read(tq_ctx *ctx, const tq_gguf *g, tq_model *m);
void tq_model_free(tq_model *m);

/* Model identity: a hash of the architecture, its hyperparameter keys and
 * the tensor table (names, types, shapes), not of the weights' values. */
uint64_t tq_model_fingerprint(const tq_gguf *g);

#ifdef __cplusplus
}
#endif
#endif
