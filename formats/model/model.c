/* model.c - a model's facts, read once (model.h). */
#include "model.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* The key {arch}.{name} into key[size]. */
static const char *arch_key(const tq_model *m, const char *name, char *key, size_t size)
{
    snprintf(key, size, "%s.%s", m->arch, name);
    return key;
}

static int64_t arch_int(const tq_model *m, const char *name, int64_t fallback)
{
    char key[160];
    return tq_gguf_get_int(m->gguf, arch_key(m, name, key, sizeof key), fallback);
}

/* 1 and *out where {arch}.{name} is there and a number. */
static int arch_float(const tq_model *m, const char *name, double *out)
{
    char key[160];
    int64_t i = tq_gguf_find_key(m->gguf, arch_key(m, name, key, sizeof key));
    return i >= 0 && tq_gguf_kv_get_float(m->gguf, i, 0, out) == 0;
}

/* A count that must fit 32 bits and not be negative. */
static tq_status count(tq_ctx *ctx, const tq_model *m, const char *name, int64_t fallback,
                       uint32_t *out)
{
    int64_t v = arch_int(m, name, fallback);
    if (v < 0 || v > (int64_t)UINT32_MAX)
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s.%s is %lld", m->arch, name, (long long)v);
    *out = (uint32_t)v;
    return TQ_OK;
}

/* K's (value 0) or V's head size: key_length / value_length, else n_embd / n_head. */
static uint32_t head_size(const tq_model *m, int value)
{
    int64_t v = arch_int(m, value ? "attention.value_length" : "attention.key_length", 0);
    if (v > 0 && v <= (int64_t)UINT32_MAX) return (uint32_t)v;
    return m->n_head && m->n_embd % m->n_head == 0 ? m->n_embd / m->n_head : 0;
}

static tq_status read_swa_pattern(tq_ctx *ctx, tq_model *m)
{
    char key[160];
    int64_t k =
        tq_gguf_find_key(m->gguf, arch_key(m, "attention.sliding_window_pattern", key, sizeof key));
    uint64_t n = k >= 0 ? tq_gguf_kv_count(m->gguf, k) : 0;
    if (!n) return TQ_OK;
    if (n > 65536)
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: %llu entries", key, (unsigned long long)n);
    if (!(m->swa_pattern = malloc(n))) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (uint64_t il = 0; il < n; il++) {
        int64_t b = 0;
        if (tq_gguf_kv_get_int(m->gguf, k, il, &b)) { /* not numbers: no split known */
            free(m->swa_pattern);
            m->swa_pattern = NULL;
            m->swa_pattern_bad = 1;
            m->n_swa_pattern = (uint32_t)n;
            return TQ_OK;
        }
        m->swa_pattern[il] = b != 0;
    }
    m->n_swa_pattern = (uint32_t)n;
    return TQ_OK;
}

/* The K RoPE of the global layers and of the sliding ones (model.h, 5.), each where tq can
 * rebuild it: n_rot even and at most the head, a base and a scale above 0. */
static void read_rope(tq_model *m)
{
    char key[160];
    double base = 10000, factor = 1, v;
    arch_float(m, "rope.freq_base", &base);
    uint64_t tl = 0;
    const char *type =
        tq_gguf_get_str(m->gguf, arch_key(m, "rope.scaling.type", key, sizeof key), "none", &tl);
    if (tl == 6 && !memcmp(type, "linear", 6))
        arch_float(m, "rope.scaling.factor", &factor);
    else if (!(tl == 4 && !memcmp(type, "none", 4)))
        return; /* YaRN, LongRoPE, ...: not rebuilt */
    else if (arch_float(m, "rope.scale_linear", &v))
        factor = v;
    uint32_t n_rot = m->n_rot;
    if (!n_rot || n_rot > m->head_k || n_rot % 2) return;
    if (!m->kv_row || m->kv_row->mrope) return; /* unverified, or M-RoPE's sections */
    /* per-frequency factors (Llama 3.1's long-context scaling, gemma4's proportional RoPE:
       ggml_rope_ext's freq_factors) turn some pairs slower: not rebuilt */
    if (tq_gguf_find_tensor(m->gguf, "rope_freqs.weight") >= 0) return;
    tq_rope_pairs pairs = m->kv_row->rope;
    m->rope = (tq_rope){m->head_k, n_rot, pairs, (float)base, (float)(1.0 / factor)};
    m->rope_known = factor > 0 && base > 0;
    double swa_base = base, swa_factor = factor;
    if (arch_float(m, "rope.freq_base_swa", &v)) {
        swa_base = v;
        swa_factor = 1;
    } else if (m->kv_row->swa_rope_base > 0) { /* llama.cpp's fixed base for these */
        swa_base = m->kv_row->swa_rope_base;
        swa_factor = 1;
    }
    /* sliding layers of their own head size and rotary dimensions (gemma4: key_length_swa,
       rope.dimension_count_swa, which defaults to the global layers') */
    uint32_t swa_head = m->head_k_swa ? m->head_k_swa : m->head_k;
    int64_t swa_rot = arch_int(m, "rope.dimension_count_swa", n_rot);
    m->rope_swa = (tq_rope){swa_head, (uint32_t)swa_rot, pairs, (float)swa_base,
                            (float)(1.0 / swa_factor)};
    m->rope_swa_known = swa_factor > 0 && swa_base > 0 && swa_rot > 0 && swa_rot % 2 == 0 &&
                        swa_rot <= (int64_t)swa_head;
}

/* Entry i of the array key {arch}.{name}, or the scalar's value for every i; fallback where
 * the key is absent or not a number. */
static int64_t arch_int_at(const tq_model *m, const char *name, uint64_t i, int64_t fallback)
{
    char key[160];
    int64_t k = tq_gguf_find_key(m->gguf, arch_key(m, name, key, sizeof key));
    int64_t v = fallback;
    if (k < 0) return fallback;
    if (tq_gguf_kv_type(m->gguf, k) != TQ_GGUF_ARRAY) return arch_int(m, name, fallback);
    if (i >= tq_gguf_kv_count(m->gguf, k) || tq_gguf_kv_get_int(m->gguf, k, i, &v)) return fallback;
    return v;
}

/* Which layers keep K/V and which a recurrent state (model.h, 6.). */
static tq_status read_memory(tq_ctx *ctx, tq_model *m)
{
    uint32_t n = m->n_layer;
    if (!(m->kv_layer = malloc(n ? n : 1)))
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_arch_memory mem = m->kv_row ? m->kv_row->mem : TQ_MEM_KV;
    int64_t nextn = arch_int(m, "nextn_predict_layers", 0);
    int64_t shared = arch_int(m, "attention.shared_kv_layers", 0);
    int64_t every = arch_int(m, "full_attention_interval", 4);
    char key[160];
    int listed = tq_gguf_find_key(m->gguf, arch_key(m, "attention.recurrent_layers", key,
                                                    sizeof key)) >= 0;
    if (nextn < 0 || (uint64_t)nextn > n || shared < 0 || (uint64_t)shared > n || every < 1)
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: nextn_predict_layers %lld, "
                                "shared_kv_layers %lld, full_attention_interval %lld",
                                m->arch, (long long)nextn, (long long)shared, (long long)every);
    for (uint32_t il = 0; il < n; il++) {
        int trunk = il < n - (uint32_t)nextn, recurrent = 0;
        if (mem == TQ_MEM_RECURRENT)
            recurrent = 1;
        else if (mem == TQ_MEM_HYBRID_HEADS)
            recurrent = arch_int_at(m, "attention.head_count_kv", il, 1) == 0;
        else if (mem == TQ_MEM_HYBRID_EVERY && listed)
            recurrent = arch_int_at(m, "attention.recurrent_layers", il, 0) != 0;
        else if (mem == TQ_MEM_HYBRID_EVERY)
            recurrent = (il + 1) % (uint64_t)every != 0;
        recurrent &= trunk;
        m->kv_layer[il] = trunk && !recurrent && il < n - (uint32_t)shared;
        m->n_kv_layer += m->kv_layer[il];
        m->n_recurrent += (uint32_t)recurrent;
    }
    m->mla = arch_int(m, "attention.key_length_mla", 0) > 0 &&
             arch_int(m, "attention.value_length_mla", 0) > 0;
    return TQ_OK;
}

tq_status tq_model_read(tq_ctx *ctx, const tq_gguf *g, tq_model *m)
{
    memset(m, 0, sizeof *m);
    m->gguf = g;
    uint64_t alen = 0;
    const char *a = tq_gguf_get_str(g, "general.architecture", "", &alen);
    if (alen >= sizeof m->arch)
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "general.architecture of %llu bytes",
                                (unsigned long long)alen);
    memcpy(m->arch, a, alen);
    m->row = tq_arch_find(m->arch);
    m->kv_row = tq_arch_kv(m->arch);
    char key[160];
    int64_t kv = tq_gguf_find_key(g, arch_key(m, "attention.head_count_kv", key, sizeof key));
    m->head_kv_per_layer = kv >= 0 && tq_gguf_kv_type(g, kv) == TQ_GGUF_ARRAY;
    tq_status st = count(ctx, m, "block_count", 0, &m->n_layer);
    if (!st) st = count(ctx, m, "embedding_length", 0, &m->n_embd);
    if (!st) st = count(ctx, m, "attention.head_count", 0, &m->n_head);
    if (!st && !m->head_kv_per_layer)
        st = count(ctx, m, "attention.head_count_kv", m->n_head, &m->n_head_kv);
    if (st) return st;
    int64_t w = arch_int(m, "attention.sliding_window", 0);
    m->swa_window = w > 0 && w < INT32_MAX ? (uint32_t)w : 0;
    m->head_k = head_size(m, 0);
    m->head_v = head_size(m, 1);
    int64_t swa_k = arch_int(m, "attention.key_length_swa", 0);
    m->head_k_swa = swa_k > 0 && swa_k <= (int64_t)UINT32_MAX ? (uint32_t)swa_k : 0;
    int64_t n_rot = arch_int(m, "rope.dimension_count", m->head_k);
    m->n_rot = n_rot > 0 && n_rot <= (int64_t)UINT32_MAX ? (uint32_t)n_rot : 0;
    read_rope(m);
    m->innerq_folded = tq_gguf_find_key(g, "tq.innerq.folded") >= 0;
    m->fingerprint = tq_model_fingerprint(g);
    st = read_swa_pattern(ctx, m);
    return st ? st : read_memory(ctx, m);
}

void tq_model_free(tq_model *m)
{
    free(m->swa_pattern);
    free(m->kv_layer);
    memset(m, 0, sizeof *m);
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
