/* arch.c - the architecture table (arch.h) and what follows from it. */
#include "arch.h"
#include "model.h"

#include <stdio.h>
#include <string.h>

#define H TQ_PAIRS_HALVES
#define A TQ_PAIRS_ADJACENT

/* One row per architecture tq knows a fact of.
 *   head   head size every model of it has (gemma3: 256, where the row
 *          width of one KV head cannot tell 256 from 2 x 128; 0: metadata)
 *   rope   H: NeoX halves, A: adjacent pairs, as llama.cpp's graph runs it
 *   swa    iSWA period: layer il slides when il % swa < swa - 1 (llama.cpp's
 *          default when the GGUF has no sliding_window_pattern; gpt-oss's and
 *          llama4's are set in code: openai-moe.cpp, llama4.cpp load_swa_pattern)
 *   base   RoPE base of the sliding layers without rope.freq_base_swa
 *   qkn    QK-norm: E[q_j^2] is attn_q_norm's gain squared, exactly
 *   sand   sandwich (post) norms, which do not commute with a rotation of
 *          the residual stream
 *   rot    rotate-weights: 1 R1 and R2, 2 R2 only, 0 not supported
 *   mem    KV: K/V of every layer; HH: hybrid, head_count_kv 0 marks a recurrent layer
 *          (granite-hybrid.cpp, lfm2.cpp); HE: hybrid, every 4th layer attention
 *          (qwen35.cpp, qwen3next.cpp); RE: recurrent only (mamba, rwkv)
 *   nope   layer il has no RoPE when (il + 1) % nope == 0, set in code (smollm3.cpp
 *          n_no_rope_layer_step, llama4.cpp's default 4); 0: every layer has RoPE
 *   chunk  the sliding layers attend to the positions of their chunk (llama4.cpp: 8192, set
 *          in code over the GGUF's value) instead of a window
 *   mr     M-RoPE sections (llama_model_rope_type MROPE/IMROPE: qwen35): not rebuilt
 *   sk     learned attention sinks (openai-moe.cpp attn_sinks): weights, nothing cached
 *   ok     its KV facts verified through llama.cpp: a tiny model's session and slot files
 *          round-trip and restore (tests/oracle/kv_families.py; gemma3: kv_gemma.py), its RoPE
 *          facts where tq rebuilds them (kv_rope_facts.py); 0: tq uses none of them for
 *          snapshots (the rows stay for rotate-weights) */
#define KV TQ_MEM_KV
#define HH TQ_MEM_HYBRID_HEADS
#define HE TQ_MEM_HYBRID_EVERY
#define RE TQ_MEM_RECURRENT
/* clang-format off */
static const tq_arch arch_table[] = {
    /* name          head rope swa base   qkn sand rot mem nope chunk mr sk ok */
    {"llama",         0,  A,   0,  0,     0,  0,   1,  KV, 0,    0,     0,  0,  1},
    {"mistral",       0,  A,   0,  0,     0,  0,   1,  KV, 0,    0,     0,  0,  0},
    {"mistral3",      0,  A,   0,  0,     0,  0,   1,  KV, 0,    0,     0,  0,  1},
    {"smollm3",       0,  A,   0,  0,     0,  0,   1,  KV, 4,    0,     0,  0,  1},
    {"qwen2",         0,  H,   0,  0,     0,  0,   1,  KV, 0,    0,     0,  0,  1},
    {"qwen3",         0,  H,   0,  0,     1,  0,   1,  KV, 0,    0,     0,  0,  1},
    {"qwen35",        0,  H,   0,  0,     1,  0,   0,  HE, 0,    0,     1,  0,  1},
    {"qwen35moe",     0,  H,   0,  0,     1,  0,   0,  HE, 0,    0,     1,  0,  1},
    {"qwen3next",     0,  H,   0,  0,     1,  0,   0,  HE, 0,    0,     0,  0,  1},
    {"gpt-oss",       0,  H,   2,  0,     0,  0,   0,  KV, 0,    0,     0,  1,  1},
    {"llama4",        0,  A,   4,  0,     0,  0,   0,  KV, 4,    8192,  0,  0,  1},
    {"deepseek2",     0,  A,   0,  0,     0,  0,   0,  KV, 0,    0,     0,  0,  1},
    {"granitehybrid", 0,  A,   0,  0,     0,  0,   0,  HH, 0,    0,     0,  0,  1},
    {"lfm2",          0,  H,   0,  0,     1,  0,   0,  HH, 0,    0,     0,  0,  1},
    {"lfm2moe",       0,  H,   0,  0,     1,  0,   0,  HH, 0,    0,     0,  0,  0},
    {"mamba",         0,  A,   0,  0,     0,  0,   0,  RE, 0,    0,     0,  0,  1},
    {"mamba2",        0,  A,   0,  0,     0,  0,   0,  RE, 0,    0,     0,  0,  1},
    {"rwkv6",         0,  A,   0,  0,     0,  0,   0,  RE, 0,    0,     0,  0,  1},
    {"rwkv7",         0,  A,   0,  0,     0,  0,   0,  RE, 0,    0,     0,  0,  1},
    {"gemma",         0,  H,   0,  0,     0,  0,   0,  KV, 0,    0,     0,  0,  0},
    {"gemma2",        0,  H,   2,  0,     0,  1,   2,  KV, 0,    0,     0,  0,  0},
    {"gemma3",        256, H,  6,  10000, 1,  1,   2,  KV, 0,    0,     0,  0,  1},
    {"gemma3n",       0,  H,   0,  0,     0,  0,   0,  KV, 0,    0,     0,  0,  0},
    {"gemma4",        0,  H,   0,  10000, 1,  1,   0,  KV, 0,    0,     0,  0,  1},
    {"cohere2",       0,  A,   4,  0,     0,  0,   0,  KV, 0,    0,     0,  0,  0},
    {"qwen",          0,  H,   0,  0,     0,  0,   0,  KV, 0,    0,     0,  0,  0},
    {"qwen2moe",      0,  H,   0,  0,     0,  0,   0,  KV, 0,    0,     0,  0,  0},
    {"qwen3moe",      0,  H,   0,  0,     1,  0,   0,  KV, 0,    0,     0,  0,  0},
    {"phi2",          0,  H,   0,  0,     0,  0,   0,  KV, 0,    0,     0,  0,  0},
    {"phi3",          0,  H,   0,  0,     0,  0,   0,  KV, 0,    0,     0,  0,  0},
    {"phimoe",        0,  H,   0,  0,     0,  0,   0,  KV, 0,    0,     0,  0,  0},
    {"stablelm",      0,  H,   0,  0,     0,  0,   0,  KV, 0,    0,     0,  0,  0},
    {"starcoder2",    0,  H,   0,  0,     0,  0,   0,  KV, 0,    0,     0,  0,  0},
    {"gptneox",       0,  H,   0,  0,     0,  0,   0,  KV, 0,    0,     0,  0,  0},
    {"falcon",        0,  H,   0,  0,     0,  0,   0,  KV, 0,    0,     0,  0,  0},
    {"olmo2",         0,  H,   0,  0,     0,  0,   0,  KV, 0,    0,     0,  0,  0},
    {"olmoe",         0,  H,   0,  0,     0,  0,   0,  KV, 0,    0,     0,  0,  0},
    {"openelm",       0,  H,   0,  0,     0,  0,   0,  KV, 0,    0,     0,  0,  0},
    {"exaone",        0,  H,   0,  0,     0,  0,   0,  KV, 0,    0,     0,  0,  0},
    {"nemotron",      0,  H,   0,  0,     0,  0,   0,  KV, 0,    0,     0,  0,  0},
    {"codeshell",     0,  H,   0,  0,     0,  0,   0,  KV, 0,    0,     0,  0,  0},
    {"orion",         0,  H,   0,  0,     0,  0,   0,  KV, 0,    0,     0,  0,  0},
    {"minicpm3",      0,  H,   0,  0,     0,  0,   0,  KV, 0,    0,     0,  0,  0},
    {"bitnet",        0,  H,   0,  0,     0,  0,   0,  KV, 0,    0,     0,  0,  0},
    {"dbrx",          0,  H,   0,  0,     0,  0,   0,  KV, 0,    0,     0,  0,  0},
    {"plamo",         0,  H,   0,  0,     0,  0,   0,  KV, 0,    0,     0,  0,  0},
};
/* clang-format on */
#undef KV
#undef HH
#undef HE
#undef RE
#undef H
#undef A

const tq_arch *tq_arch_find(const char *name)
{
    for (size_t i = 0; name && i < sizeof arch_table / sizeof *arch_table; i++)
        if (!strcmp(name, arch_table[i].name)) return &arch_table[i];
    return NULL;
}

const tq_arch *tq_arch_at(size_t i)
{
    return i < sizeof arch_table / sizeof *arch_table ? &arch_table[i] : NULL;
}

const tq_arch *tq_arch_kv(const char *name)
{
    const tq_arch *a = tq_arch_find(name);
    return a && a->verified ? a : NULL;
}

tq_rope_pairs tq_arch_rope_pairs(const char *arch)
{
    const tq_arch *a = tq_arch_kv(arch);
    return a ? a->rope : TQ_PAIRS_ADJACENT;
}

uint32_t tq_arch_head_dim(const char *arch)
{
    const tq_arch *a = tq_arch_kv(arch);
    return a ? a->head_dim : 0;
}

uint32_t tq_arch_swa_period(const char *arch)
{
    const tq_arch *a = tq_arch_kv(arch);
    return a ? a->swa_period : 0;
}

uint32_t tq_arch_head_size(uint32_t given, const tq_model *model, uint32_t layout_head_dim,
                         const char *arch, tq_head_source *from)
{
    uint32_t d = 0;
    tq_head_source src = TQ_HEAD_NONE;
    if (given) {
        d = given;
        src = TQ_HEAD_GIVEN;
    } else if (model && (d = model->head_k)) {
        src = TQ_HEAD_MODEL;
    } else if ((d = layout_head_dim)) {
        src = TQ_HEAD_LAYOUT;
    } else if ((d = tq_arch_head_dim(arch))) {
        src = TQ_HEAD_ARCH;
    }
    if (from) *from = src;
    return d;
}

uint32_t tq_arch_group_for_width(uint64_t width, uint32_t head_dim, int *guessed)
{
    *guessed = 0;
    int valid = head_dim && tq_is_pow2(head_dim) && head_dim >= 8 && head_dim <= 512;
    if (valid && width % head_dim == 0) return head_dim;
    *guessed = 1;
    for (uint32_t g = 128; g >= 8; g /= 2)
        if (width % g == 0) return g;
    return 0;
}
