/* arch.h - what llama.cpp makes of a GGUF, per architecture: one table
 * (arch.c) of head size, RoPE layout and bases, iSWA pattern, QK-norm and
 * sandwich norms, and what follows from it: a model's head size and
 * identity, a state's rotation group.  Facts of llama.cpp's graphs, read in
 * its source (src/llama-model.cpp, src/llama-arch.cpp); nothing here reads
 * files. */
#ifndef TQ_ARCH_H
#define TQ_ARCH_H

#include "gguf.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A model's memory as llama.cpp builds it (create_memory, llama-model.cpp). */
typedef enum tq_arch_memory {
    TQ_MEM_KV = 0,       /* a KV cache of every layer (one, or iSWA's two) */
    TQ_MEM_HYBRID_HEADS, /* hybrid: layers with attention.head_count_kv 0 are recurrent */
    TQ_MEM_HYBRID_EVERY, /* hybrid: every full_attention_interval-th layer (4) has attention,
                            unless attention.recurrent_layers lists them */
    TQ_MEM_RECURRENT     /* a recurrent state of every layer, no KV cache */
} tq_arch_memory;

typedef struct tq_arch {
    const char *name;    /* general.architecture */
    uint32_t head_dim;   /* every model of it has this head size (0: the metadata says) */
    tq_rope_pairs rope;  /* NeoX halves (i, i + n_rot/2) or adjacent pairs (2i, 2i+1) */
    uint32_t swa_period; /* iSWA: layer il slides when il % p < p - 1 (0: no iSWA) */
    float swa_rope_base; /* the sliding layers' RoPE base when the GGUF gives none (0: same) */
    int qk_norm;         /* Q and K RMS-normalized per head with learned gains */
    int sandwich_norms;  /* RMSNorms on the attention and FFN outputs too */
    int rotate;          /* rotate-weights: 0 no, 1 R1 and R2, 2 R2 only (sandwich norms) */
    tq_arch_memory mem;  /* which layers keep K/V and which a recurrent state */
    uint32_t nope;       /* layer il has no RoPE when (il + 1) % nope == 0 (0: every layer has) */
    uint32_t chunk;      /* the sliding layers attend within chunks of this many positions
                            instead of a window (llama4's chunked attention; 0: a window) */
    int mrope;           /* multi-section RoPE (M-RoPE, IMROPE): tq does not rebuild it */
    int sinks;           /* learned attention sinks (in the weights, not the cache) */
    int verified;        /* its KV facts checked through llama.cpp by tests/oracle */
} tq_arch;

typedef struct tq_model tq_model; /* model.h: a model's facts */

/* The row of an architecture; NULL for one llama.cpp runs that tq knows
 * nothing particular of (then: adjacent RoPE pairs, no iSWA, no rotation). */
const tq_arch *tq_arch_find(const char *name);
/* The row where its KV facts are verified through llama.cpp (column ok), else NULL: what the
 * snapshots use; an architecture not verified is coded as one tq knows nothing of. */
const tq_arch *tq_arch_kv(const char *name);
/* The i-th row (NULL past the last): for lists of what a column allows. */
const tq_arch *tq_arch_at(size_t i);
/* Table facts with their defaults for an unknown (or NULL) name. */
tq_rope_pairs tq_arch_rope_pairs(const char *arch);
uint32_t tq_arch_head_dim(const char *arch);   /* 0: not fixed by the architecture */
uint32_t tq_arch_swa_period(const char *arch); /* 0: no iSWA */

/* Where a head size came from (tq_arch_head_size). */
typedef enum tq_head_source {
    TQ_HEAD_NONE = 0, /* nothing says: rows decide (tq_arch_group_for_width guesses) */
    TQ_HEAD_GIVEN,    /* --head-dim */
    TQ_HEAD_MODEL,    /* the model's metadata */
    TQ_HEAD_LAYOUT,   /* the source's layout shows it (a NumPy dump's [.., heads, head_dim]) */
    TQ_HEAD_ARCH      /* the architecture's table row (gemma3: 256) */
} tq_head_source;

/* The one head-size rule: given, else the model's, else the source layout's
 * (layout_head_dim, 0 if none), else the architecture's; 0 and
 * TQ_HEAD_NONE when none says. */
uint32_t tq_arch_head_size(uint32_t given, const tq_model *model, uint32_t layout_head_dim,
                         const char *arch, tq_head_source *from);
/* The rotation group for rows of `width`: the head size when it is a valid
 * group (a power of two, 8..512) that divides the row, else the largest
 * power of two up to 128 that does (*guessed = 1); 0 if none does. */
uint32_t tq_arch_group_for_width(uint64_t width, uint32_t head_dim, int *guessed);

#ifdef __cplusplus
}
#endif
#endif
