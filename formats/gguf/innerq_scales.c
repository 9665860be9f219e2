/* innerq_scales.c - InnerQ scale files, see innerq_scales.h and INNERQ.md. */
#include "file_io.h"
#include "innerq_scales.h"
#include "npy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GENERAL_TYPE "tq-innerq"

static int scale_ok(float v) { return v > 0.0f && !isinf(v); }

static tq_status load_npy(tq_ctx *ctx, const char *path, const uint8_t *p, uint64_t size,
                          tq_innerq_set *out)
{
    tq_npy_header h;
    char err[256];
    if (tq_npy_parse(p, size, &h, err, sizeof err))
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: %s", path, err);
    const char *why = NULL;
    uint64_t d = h.ndim ? h.shape[h.ndim - 1] : 0, l = h.ndim == 3 ? h.shape[0] : 1;
    if ((strcmp(h.descr, "<f4") && strcmp(h.descr, "<f2")) || h.fortran_order)
        why = "not a C-order float32 or float16 array";
    else if (!(h.ndim == 1 || (h.ndim == 2 && h.shape[0] == 2) || (h.ndim == 3 && h.shape[1] == 2)))
        why = "not shaped [head_dim], [2, head_dim] (K, V) or [layers, 2, head_dim]";
    else if (!d || d > 512 || !l || l > 65536)
        why = "an implausible size";
    else if (h.count * h.itemsize != size - h.header_len)
        why = "data size does not match its shape";
    if (why) return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: InnerQ scales: %s", path, why);
    float *s = malloc(l * 2 * d * sizeof(float));
    if (!s) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    float *raw = malloc(h.count * sizeof(float));
    if (!raw || tq_dequantize(ctx, h.itemsize == 4 ? TQ_DT_F32 : TQ_DT_F16, p + h.header_len,
                              h.count, raw)) {
        free(s);
        free(raw);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    for (uint64_t i = 0; i < l * 2 * d; i++) { /* [D] serves K and V alike */
        s[i] = raw[h.ndim == 1 ? i % d : i];
        if (!scale_ok(s[i])) {
            double bad = s[i];
            free(s);
            free(raw);
            return tq_ctx_set_error(ctx, TQ_ERR_FORMAT,
                                    "%s: InnerQ scale %llu is %g, not finite and positive", path,
                                    (unsigned long long)i, bad);
        }
    }
    free(raw);
    *out = (tq_innerq_set){(uint32_t)l, 1, (uint32_t)d, s, 1, 0, 0, "npy"};
    return TQ_OK;
}

static tq_status gguf_fail(tq_ctx *ctx, tq_gguf *g, float *s, const char *path, const char *why)
{
    free(s);
    tq_gguf_close(g);
    return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: InnerQ scales: %s", path, why);
}

/* One [head_dim, n_head] F32 tensor into dst; NULL, or why not. */
static const char *read_tensor(const tq_gguf *g, const char *name, uint32_t hd, uint32_t nh,
                               float *dst)
{
    int64_t i = tq_gguf_find_tensor(g, name);
    if (i < 0) return "a layer's tensor is missing";
    const int64_t *ne = tq_gguf_tensor_ne(g, i);
    if (tq_gguf_tensor_type(g, i)->dtype != TQ_DT_F32 || ne[0] != hd || ne[1] != nh || ne[2] != 1 ||
        ne[3] != 1)
        return "a tensor that is not F32 [head_dim, heads]";
    memcpy(dst, tq_gguf_tensor_data(g, i), (size_t)hd * nh * sizeof(float));
    for (size_t j = 0; j < (size_t)hd * nh; j++)
        if (!scale_ok(dst[j])) return "a scale that is not finite and positive";
    return NULL;
}

static tq_status load_gguf(tq_ctx *ctx, const char *path, tq_gguf *g, tq_innerq_set *out)
{
    if (!tq_innerq_is_scales(g))
        return gguf_fail(ctx, g, NULL, path,
                         "a GGUF file without general.type " GENERAL_TYPE
                         " (a model, not scales?)");
    int64_t nl = tq_gguf_get_int(g, "tq.innerq.layers", 0),
            nh = tq_gguf_get_int(g, "tq.innerq.heads", 0),
            hd = tq_gguf_get_int(g, "tq.innerq.head_dim", 0),
            hv = tq_gguf_get_int(g, "tq.innerq.has_v", -1);
    if (nl < 1 || nl > 65536 || nh < 1 || nh > 4096 || hd < 2 || hd > 4096 || hv < 0 || hv > 1 ||
        nh * hd > (1 << 20))
        return gguf_fail(ctx, g, NULL, path,
                         "tq.innerq.layers, heads, head_dim or has_v missing or implausible");
    size_t per = (size_t)nh * (size_t)hd;
    /* every layer's K (and V) tensor is in the file: its counts and bytes bound the allocation
       before it is made (a header claiming 65536 layers of 4096 x 256 asked for gigabytes) */
    uint64_t want = (uint64_t)nl * (uint64_t)(hv ? 2 : 1);
    if ((uint64_t)tq_gguf_n_tensors(g) < want ||
        want * per * sizeof(float) > tq_gguf_file_size(g))
        return gguf_fail(ctx, g, NULL, path, "fewer scale tensors in the file than its layers");
    float *s = malloc((size_t)nl * 2 * per * sizeof *s);
    if (!s) return gguf_fail(ctx, g, NULL, path, "out of memory");
    char name[64];
    for (int64_t l = 0; l < nl; l++)
        for (int v = 0; v < 2; v++) {
            float *dst = s + ((size_t)l * 2 + (size_t)v) * per;
            if (v && !hv) {
                for (size_t j = 0; j < per; j++) dst[j] = 1.0f;
                continue;
            }
            snprintf(name, sizeof name, "blk.%lld.innerq_%c", (long long)l, v ? 'v' : 'k');
            const char *why = read_tensor(g, name, (uint32_t)hd, (uint32_t)nh, dst);
            if (why) return gguf_fail(ctx, g, s, path, why);
        }
    *out = (tq_innerq_set){(uint32_t)nl, (uint32_t)nh, (uint32_t)hd, s, (int)hv, 0, 0, ""};
    int64_t k = tq_gguf_find_key(g, "tq.innerq.model.fingerprint");
    if (k >= 0 && tq_gguf_kv_get_uint(g, k, 0, &out->model_fingerprint) == 0) out->has_model = 1;
    uint64_t ml = 0;
    const char *m = tq_gguf_get_str(g, "tq.innerq.method", "", &ml);
    snprintf(out->method, sizeof out->method, "%.*s", (int)(ml < 15 ? ml : 15), m);
    tq_gguf_close(g);
    return TQ_OK;
}

tq_status tq_innerq_set_load(tq_ctx *ctx, const char *path, tq_innerq_set *out)
{
    memset(out, 0, sizeof *out);
    const uint8_t *p;
    uint64_t size;
    tq_status st = tq_map_file(ctx, path, 4, "too short for InnerQ scales", &p, &size);
    if (st) return st;
    int gguf = !memcmp(p, "GGUF", 4);
    if (!gguf) st = load_npy(ctx, path, p, size, out);
    tq_unmap_file(p, size);
    if (!gguf) return st;
    tq_gguf *g = NULL;
    if (tq_gguf_open(ctx, path, NULL, &g)) return tq_ctx_status(ctx);
    return load_gguf(ctx, path, g, out);
}

tq_status tq_innerq_set_load_memory(tq_ctx *ctx, const void *data, size_t size, const char *label,
                                    tq_innerq_set *out)
{
    memset(out, 0, sizeof *out);
    if (size < 4)
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: too short for InnerQ scales", label);
    if (memcmp(data, "GGUF", 4)) return load_npy(ctx, label, data, size, out);
    tq_gguf *g = NULL;
    if (tq_gguf_open_memory(ctx, data, size, label, NULL, &g)) return tq_ctx_status(ctx);
    return load_gguf(ctx, label, g, out);
}

const float *tq_innerq_set_at(const tq_innerq_set *s, uint32_t l, int is_v, uint32_t h)
{
    if (l >= s->n_layer) l = s->n_layer - 1;
    if (h >= s->n_head) h = s->n_head - 1;
    return s->s + (((size_t)l * 2 + (is_v != 0)) * s->n_head + h) * s->head_dim;
}

void tq_innerq_set_range(const tq_innerq_set *s, uint32_t l, int is_v, float *lo, float *hi)
{
    *lo = INFINITY;
    *hi = 0;
    for (uint32_t h = 0; h < s->n_head; h++)
        for (uint32_t j = 0; j < s->head_dim; j++) {
            float x = tq_innerq_set_at(s, l, is_v, h)[j];
            *lo = x < *lo ? x : *lo;
            *hi = x > *hi ? x : *hi;
        }
}

int tq_innerq_is_scales(const tq_gguf *g)
{
    uint64_t len;
    const char *ty = tq_gguf_get_str(g, "general.type", "", &len);
    return len == strlen(GENERAL_TYPE) && !memcmp(ty, GENERAL_TYPE, len);
}

void tq_innerq_set_free(tq_innerq_set *s)
{
    if (s) free(s->s);
    if (s) s->s = NULL;
}

static tq_status put_str(tq_gguf_writer *w, const char *key, const char *v)
{
    return tq_gguf_writer_set_str(w, key, v ? v : "", v ? strlen(v) : 0);
}

static tq_status put_f32(tq_gguf_writer *w, const char *key, double v)
{
    float f = (float)v;
    return tq_gguf_writer_set_scalar(w, key, TQ_GGUF_FLOAT32, &f);
}

tq_status tq_innerq_provenance_write(tq_gguf_writer *w, const tq_innerq_set *s,
                                     const tq_innerq_provenance *p)
{
    tq_status st = tq_gguf_writer_set_u32(w, "tq.innerq.version", 1);
    if (!st) st = put_str(w, "tq.innerq.tool", "tq " TQ_VERSION_STRING);
    if (!st) st = put_str(w, "tq.innerq.method", p->method);
    if (!st) st = put_str(w, "tq.innerq.v_method", p->v_method);
    if (!st) st = put_str(w, "tq.innerq.per", p->per);
    if (!st) st = put_str(w, "tq.innerq.rope_pairs", p->pairs);
    if (!st) st = tq_gguf_writer_set_u32(w, "tq.innerq.rope_dims", p->rope_dims);
    if (!st) st = put_str(w, "tq.innerq.query_energy", p->query_energy);
    if (!st) st = put_f32(w, "tq.innerq.strength", p->strength);
    float clamp[2] = {(float)p->clamp_lo, (float)p->clamp_hi};
    if (!st) st = tq_gguf_writer_set_array(w, "tq.innerq.clamp", TQ_GGUF_FLOAT32, 2, clamp, NULL);
    if (!st) st = tq_gguf_writer_set_u32(w, "tq.innerq.pow2", (uint32_t)p->pow2);
    if (!st) st = tq_gguf_writer_set_scalar(w, "tq.innerq.tokens", TQ_GGUF_UINT64, &p->tokens);
    if (!st) st = tq_gguf_writer_set_u32(w, "tq.innerq.layers", s->n_layer);
    if (!st) st = tq_gguf_writer_set_u32(w, "tq.innerq.heads", s->n_head);
    if (!st) st = tq_gguf_writer_set_u32(w, "tq.innerq.head_dim", s->head_dim);
    if (!st) st = tq_gguf_writer_set_u32(w, "tq.innerq.has_v", (uint32_t)s->has_v);
    if (!st && s->has_model)
        st = tq_gguf_writer_set_scalar(w, "tq.innerq.model.fingerprint", TQ_GGUF_UINT64,
                                       &s->model_fingerprint);
    if (!st && p->model_name) st = put_str(w, "tq.innerq.model.name", p->model_name);
    if (!st && p->n_sources) {
        uint64_t *lens = malloc(p->n_sources * sizeof *lens);
        if (!lens) return TQ_ERR_NOMEM;
        for (uint32_t i = 0; i < p->n_sources; i++) lens[i] = strlen(p->sources[i]);
        st = tq_gguf_writer_set_array(w, "tq.innerq.sources", TQ_GGUF_STRING, p->n_sources,
                                      p->sources, lens);
        free(lens);
        if (!st)
            st = tq_gguf_writer_set_array(w, "tq.innerq.source_xxh64", TQ_GGUF_UINT64, p->n_sources,
                                          p->source_hashes, NULL);
    }
    return st;
}

tq_status tq_innerq_set_write(tq_ctx *ctx, const char *path, const tq_innerq_set *s,
                              const tq_innerq_provenance *p, const char *const *inputs,
                              size_t n_inputs)
{
    tq_gguf_writer *w = NULL;
    tq_status st = tq_gguf_writer_new(ctx, &w);
    if (!st) st = put_str(w, "general.type", GENERAL_TYPE);
    if (!st) st = tq_innerq_provenance_write(w, s, p);
    char name[64];
    int64_t ne[2] = {s->head_dim, s->n_head};
    for (uint32_t l = 0; !st && l < s->n_layer; l++)
        for (int v = 0; !st && v < 1 + s->has_v; v++) {
            snprintf(name, sizeof name, "blk.%u.innerq_%c", l, v ? 'v' : 'k');
            st = tq_gguf_writer_add_tensor(w, name, 0, 2, ne);
        }
    if (!st) st = tq_gguf_writer_open(w, path, inputs, n_inputs);
    for (uint32_t l = 0; !st && l < s->n_layer; l++)
        for (int v = 0; !st && v < 1 + s->has_v; v++)
            st = tq_gguf_writer_write(w, tq_innerq_set_at(s, l, v, 0),
                                      (size_t)s->n_head * s->head_dim * sizeof(float));
    if (!st) st = tq_gguf_writer_finish(w);
    tq_gguf_writer_free(w);
    return st;
}
