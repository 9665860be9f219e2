/* arch.c - the architecture table (arch.h) and what follows from it. */
#include "arch.h"

#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#define H TQ_PAIRS_HALVES
#define A TQ_PAIRS_ADJACENT

/* One row per architecture tq knows a fact of.
 *   head   head size every model of it has (gemma3: 256, where the row
 *          width of one KV head cannot tell 256 from 2 x 128; 0: metadata)
 *   rope   H: NeoX halves, A: adjacent pairs, as llama.cpp's graph runs it
 *   swa    iSWA period: layer il slides when il % swa < swa - 1 (llama.cpp's
 *          default when the GGUF has no sliding_window_pattern)
 *   base   RoPE base of the sliding layers without rope.freq_base_swa
 *   qkn    QK-norm: E[q_j^2] is attn_q_norm's gain squared, exactly
 *   sand   sandwich (post) norms, which do not commute with a rotation of
 *          the residual stream
 *   rot    rotate-weights: 1 R1 and R2, 2 R2 only, 0 not supported */
static const tq_arch arch_table[] = {
    /* name        head rope swa  base    qkn sand rot */
    {"llama", 0, A, 0, 0, 0, 0, 1},        {"mistral", 0, A, 0, 0, 0, 0, 1},
    {"qwen2", 0, H, 0, 0, 0, 0, 1},        {"qwen3", 0, H, 0, 0, 1, 0, 1},
    {"gemma", 0, H, 0, 0, 0, 0, 0},        {"gemma2", 0, H, 2, 0, 0, 1, 2},
    {"gemma3", 256, H, 6, 10000, 1, 1, 2}, {"gemma3n", 0, H, 0, 0, 0, 0, 0},
    {"cohere2", 0, A, 4, 0, 0, 0, 0},      {"qwen", 0, H, 0, 0, 0, 0, 0},
    {"qwen2moe", 0, H, 0, 0, 0, 0, 0},     {"qwen3moe", 0, H, 0, 0, 1, 0, 0},
    {"phi2", 0, H, 0, 0, 0, 0, 0},         {"phi3", 0, H, 0, 0, 0, 0, 0},
    {"phimoe", 0, H, 0, 0, 0, 0, 0},       {"stablelm", 0, H, 0, 0, 0, 0, 0},
    {"starcoder2", 0, H, 0, 0, 0, 0, 0},   {"gptneox", 0, H, 0, 0, 0, 0, 0},
    {"falcon", 0, H, 0, 0, 0, 0, 0},       {"olmo2", 0, H, 0, 0, 0, 0, 0},
    {"olmoe", 0, H, 0, 0, 0, 0, 0},        {"openelm", 0, H, 0, 0, 0, 0, 0},
    {"exaone", 0, H, 0, 0, 0, 0, 0},       {"nemotron", 0, H, 0, 0, 0, 0, 0},
    {"codeshell", 0, H, 0, 0, 0, 0, 0},    {"orion", 0, H, 0, 0, 0, 0, 0},
    {"minicpm3", 0, H, 0, 0, 0, 0, 0},     {"bitnet", 0, H, 0, 0, 0, 0, 0},
    {"dbrx", 0, H, 0, 0, 0, 0, 0},         {"plamo", 0, H, 0, 0, 0, 0, 0},
};
#undef H
#undef A

const tq_arch *tq_arch_find(const char *name)
{
    for (size_t i = 0; name && i < sizeof arch_table / sizeof *arch_table; i++)
        if (!strcmp(name, arch_table[i].name)) return &arch_table[i];
    return NULL;
}

const tq_arch *tq_arch_of_model(const tq_gguf *g)
{
    uint64_t alen = 0;
    const char *a = tq_gguf_get_str(g, "general.architecture", NULL, &alen);
    char name[64];
    if (!a || alen >= sizeof name) return NULL;
    memcpy(name, a, alen);
    name[alen] = 0;
    return tq_arch_find(name);
}

tq_rope_pairs tq_arch_rope_pairs(const char *arch)
{
    const tq_arch *a = tq_arch_find(arch);
    return a ? a->rope : TQ_PAIRS_ADJACENT;
}

uint32_t tq_arch_head_dim(const char *arch)
{
    const tq_arch *a = tq_arch_find(arch);
    return a ? a->head_dim : 0;
}

uint32_t tq_arch_swa_period(const char *arch)
{
    const tq_arch *a = tq_arch_find(arch);
    return a ? a->swa_period : 0;
}

uint32_t tq_kv_head_size(uint32_t given, const tq_gguf *model, uint32_t layout_head_dim,
                         const char *arch, tq_head_source *from)
{
    uint32_t d = 0;
    tq_head_source src = TQ_HEAD_NONE;
    if (given) {
        d = given;
        src = TQ_HEAD_GIVEN;
    } else if (model && (d = tq_model_head_dim(model, 0))) {
        src = TQ_HEAD_MODEL;
    } else if ((d = layout_head_dim)) {
        src = TQ_HEAD_LAYOUT;
    } else if ((d = tq_arch_head_dim(arch))) {
        src = TQ_HEAD_ARCH;
    }
    if (from) *from = src;
    return d;
}

uint32_t tq_kv_group_for_width(uint64_t width, uint32_t head_dim, int *guessed)
{
    *guessed = 0;
    int valid = head_dim && tq_is_pow2(head_dim) && head_dim >= 8 && head_dim <= 512;
    if (valid && width % head_dim == 0) return head_dim;
    *guessed = 1;
    for (uint32_t g = 128; g >= 8; g /= 2)
        if (width % g == 0) return g;
    return 0;
}

uint64_t tq_model_fingerprint(const tq_gguf *g)
{
    XXH64_state_t *xs = XXH64_createState();
    XXH64_reset(xs, 0x74716b76ull);
    uint64_t alen = 0;
    const char *arch = tq_gguf_get_str(g, "general.architecture", "", &alen);
    XXH64_update(xs, arch, alen);
    for (int64_t i = 0; i < tq_gguf_n_kv(g); i++) {
        const char *k = tq_gguf_kv_key(g, i);
        if (strncmp(k, arch, alen) || k[alen] != '.') continue;
        uint64_t len;
        const uint8_t *raw = tq_gguf_kv_raw(g, i, &len);
        uint32_t t = (uint32_t)tq_gguf_kv_type(g, i);
        XXH64_update(xs, k, strlen(k) + 1);
        XXH64_update(xs, &t, 4);
        XXH64_update(xs, raw, len);
    }
    for (int64_t i = 0; i < tq_gguf_n_tensors(g); i++) {
        const char *n = tq_gguf_tensor_name(g, i);
        int32_t t = tq_gguf_tensor_type_id(g, i);
        XXH64_update(xs, n, strlen(n) + 1);
        XXH64_update(xs, &t, 4);
        XXH64_update(xs, tq_gguf_tensor_ne(g, i), 4 * sizeof(int64_t));
    }
    uint64_t h = XXH64_digest(xs);
    XXH64_freeState(xs);
    return h;
}

uint32_t tq_model_head_dim(const tq_gguf *g, int value)
{
    uint64_t alen;
    const char *arch = tq_gguf_get_str(g, "general.architecture", NULL, &alen);
    if (!arch || alen > 64) return 0;
    char key[128];
    snprintf(key, sizeof key, "%.*s.attention.%s", (int)alen, arch,
             value ? "value_length" : "key_length");
    int64_t v = tq_gguf_get_int(g, key, 0);
    if (v > 0) return (uint32_t)v;
    snprintf(key, sizeof key, "%.*s.embedding_length", (int)alen, arch);
    int64_t e = tq_gguf_get_int(g, key, 0);
    snprintf(key, sizeof key, "%.*s.attention.head_count", (int)alen, arch);
    int64_t h = tq_gguf_get_int(g, key, 0);
    return e > 0 && h > 0 && e % h == 0 ? (uint32_t)(e / h) : 0;
}
