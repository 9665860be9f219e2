/* model_rope.h - the RoPE a model's K cache went through, from its GGUF
 * metadata, as llama.cpp reads it: {arch}.rope.dimension_count channels
 * (else the head size), NeoX half-split pairs for the architectures llama.cpp
 * runs so, {arch}.rope.freq_base (10000 if absent), linear scaling
 * ({arch}.rope.scaling.type "linear" with .factor, or the older
 * .rope.scale_linear) as freq_scale = 1/factor.  Sliding-window layers of
 * iSWA models: {arch}.rope.freq_base_swa when present, else the base
 * llama.cpp fixes for the architecture (arch.h's table: gemma3 10000,
 * unscaled), else the
 * global layers' RoPE. */
#ifndef TQ_MODEL_ROPE_H
#define TQ_MODEL_ROPE_H

#include "arch.h" /* tq_arch_rope_pairs: NeoX halves or adjacent pairs */
#include "gguf.h"

/* 1 and *out filled when the model's K RoPE is one tq can rebuild (no YaRN,
 * LongRoPE or other non-linear scaling; heads of head_dim), else 0.  swa:
 * for the sliding-window layers. */
int tq_model_rope(const tq_gguf *g, uint32_t head_dim, int swa, tq_rope *out);

#endif
