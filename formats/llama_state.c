/* llama_state.c - the llama.cpp state-file reader (see LLAMA_STATE.md).
 * Session files exist in two v9 layouts with no marker between them, so the
 * reader tries each hypothesis in turn and accepts the one that accounts for
 * every byte of the file with valid fields. */
#include "file_io.h"
#include "kv_source.h"
#include "llama_state.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_STREAMS      4096
#define MAX_LAYERS       4096
#define MAX_SEQ_PER_CELL 4096

typedef struct cur {
    const uint8_t *p;
    uint64_t size, pos;
    char err[256];
} cur;

static int fail(cur *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(cur *c, const char *fmt, ...)
{
    if (!c->err[0]) {
        char what[200];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof what, fmt, ap);
        va_end(ap);
        snprintf(c->err, sizeof c->err, "%s: at offset %" PRIu64, what, c->pos);
    }
    return -1;
}

static int get(cur *c, void *v, uint64_t n, const char *what)
{
    if (n > c->size - c->pos)
        return fail(c, "truncated: %s needs %" PRIu64 " bytes, %" PRIu64 " left", what, n,
                    c->size - c->pos);
    memcpy(v, c->p + c->pos, n);
    c->pos += n;
    return 0;
}

static int skip(cur *c, uint64_t n, const char *what)
{
    if (n > c->size - c->pos)
        return fail(c, "truncated: %s needs %" PRIu64 " bytes, %" PRIu64 " left", what, n,
                    c->size - c->pos);
    c->pos += n;
    return 0;
}

static int parse_tensor(cur *c, tq_type_profile prof, uint32_t cells, int il, const char *kv,
                        tq_kv_tensor *t)
{
    int32_t type = 0;
    uint64_t rs = 0;
    if (get(c, &type, 4, "type") || get(c, &rs, 8, "row size")) return -1;
    t->type = tq_ggml_type_get(prof, type);
    if (!t->type)
        return fail(c, "layer %d %s: type id %d unknown in type-id profile %s", il, kv, type,
                    tq_type_profile_name(prof));
    if (!rs || rs % t->type->bytes)
        return fail(c, "layer %d %s: row size %" PRIu64 " is not whole %s blocks", il, kv, rs,
                    t->type->name);
    t->row_size = rs;
    t->width = rs / t->type->bytes * t->type->block;
    if (cells && rs > (c->size - c->pos) / cells)
        return fail(c, "layer %d %s: %u rows of %" PRIu64 " bytes run past the end", il, kv, cells,
                    rs);
    t->bytes = rs * cells;
    t->data_off = c->pos;
    t->data = c->p + c->pos;
    c->pos += t->bytes;
    return 0;
}

static int parse_vtrans(cur *c, tq_type_profile prof, uint32_t cells, int il, tq_kv_tensor *t)
{
    int32_t type = 0;
    uint32_t size_el = 0, n_embd = 0;
    if (get(c, &type, 4, "type") || get(c, &size_el, 4, "element size") ||
        get(c, &n_embd, 4, "V width"))
        return -1;
    t->type = tq_ggml_type_get(prof, type);
    if (!t->type)
        return fail(c, "layer %d V: type id %d unknown in type-id profile %s", il, type,
                    tq_type_profile_name(prof));
    if (t->type->block != 1 || size_el != t->type->bytes)
        return fail(
            c, "layer %d V: transposed %s with element size %u is not a layout llama.cpp writes",
            il, t->type->name, size_el);
    if (!n_embd) return fail(c, "layer %d V: width 0", il);
    t->transposed = 1;
    t->width = n_embd;
    t->row_size = (uint64_t)n_embd * size_el;
    if (cells && t->row_size > (c->size - c->pos) / cells)
        return fail(c, "layer %d V: data runs past the end", il);
    t->bytes = t->row_size * cells;
    t->data_off = c->pos;
    t->data = c->p + c->pos;
    c->pos += t->bytes;
    return 0;
}

static int parse_kv_state(cur *c, tq_type_profile prof, int ext, tq_kv_state *k)
{
    uint32_t ns = 0;
    if (get(c, &ns, 4, "n_stream")) return -1;
    if (!ns || ns > MAX_STREAMS) return fail(c, "n_stream %u is not in [1, %d]", ns, MAX_STREAMS);
    k->streams = calloc(ns, sizeof *k->streams);
    if (!k->streams) return fail(c, "out of memory");
    k->n_stream = ns;
    for (uint32_t s = 0; s < ns; s++) {
        tq_kv_stream *st = &k->streams[s];
        if (get(c, &st->cell_count, 4, "cell count")) return -1;
        if (!st->cell_count) continue;
        if (st->cell_count > (c->size - c->pos) / 8)
            return fail(c, "stream %u: cell count %u cannot fit in the file", s, st->cell_count);
        st->meta_off = c->pos;
        for (uint32_t i = 0; i < st->cell_count; i++) {
            int32_t pos = 0;
            uint32_t nseq = 0;
            if (get(c, &pos, 4, "cell pos") || get(c, &nseq, 4, "cell seq count")) return -1;
            if (nseq > MAX_SEQ_PER_CELL)
                return fail(c, "stream %u cell %u: %u sequence ids", s, i, nseq);
            if ((ext && skip(c, 8, "cell extension")) || skip(c, 4ull * nseq, "cell seq ids"))
                return -1;
        }
        st->meta_len = c->pos - st->meta_off;
        if (get(c, &st->v_trans, 4, "v_trans") || get(c, &st->n_layer, 4, "n_layer")) return -1;
        if (st->v_trans > 1) return fail(c, "stream %u: v_trans %u is not 0 or 1", s, st->v_trans);
        if (!st->n_layer || st->n_layer > MAX_LAYERS)
            return fail(c, "stream %u: %u layers", s, st->n_layer);
        st->k = calloc(st->n_layer, sizeof *st->k);
        st->v = calloc(st->n_layer, sizeof *st->v);
        if (!st->k || !st->v) return fail(c, "out of memory");
        for (uint32_t il = 0; il < st->n_layer; il++)
            if (parse_tensor(c, prof, st->cell_count, (int)il, "K", &st->k[il])) return -1;
        for (uint32_t il = 0; il < st->n_layer; il++) {
            if (st->v_trans ? parse_vtrans(c, prof, st->cell_count, (int)il, &st->v[il])
                            : parse_tensor(c, prof, st->cell_count, (int)il, "V", &st->v[il]))
                return -1;
        }
    }
    return 0;
}

/* KV states from c->pos to the end of the file, exactly. */
static int parse_memory(cur *c, tq_kv_view *s, int ext)
{
    s->n_kv = 0;
    while (c->pos < c->size) {
        if (s->n_kv == TQ_KV_MAX_STATES)
            return fail(c, "%" PRIu64 " bytes after the KV state(s) that tq does not understand",
                        c->size - c->pos);
        if (parse_kv_state(c, s->profile, ext, &s->kv[s->n_kv++])) return -1;
    }
    if (!s->n_kv) return fail(c, "no KV state");
    return 0;
}

/* The old (pre-February-2026) outputs section of session files. */
static int parse_outputs(cur *c, uint32_t n_tokens)
{
    int32_t n_out = 0;
    uint64_t n = 0;
    if (get(c, &n_out, 4, "n_outputs")) return -1;
    if (n_out < 0 || (uint32_t)n_out > n_tokens + 1)
        return fail(c, "n_outputs %d out of range", n_out);
    for (int32_t i = 0; i < n_out; i++) {
        int32_t p = 0;
        if (get(c, &p, 4, "output position")) return -1;
        if (p < 0) return fail(c, "negative output position");
    }
    if (get(c, &n, 8, "logits size")) return -1;
    if (n > (c->size - c->pos) / 4 || (n_out == 0 && n))
        return fail(c, "logits size %" PRIu64 " is implausible", n);
    c->pos += 4 * n;
    if (get(c, &n, 8, "embeddings size")) return -1;
    if (n > (c->size - c->pos) / 4 || (n_out == 0 && n))
        return fail(c, "embeddings size %" PRIu64 " is implausible", n);
    c->pos += 4 * n;
    return 0;
}

static tq_status parse(tq_ctx *ctx, tq_kv_view *s)
{
    cur c = {s->map, s->size, 0, ""};
    uint32_t magic = 0;
    if (get(&c, &magic, 4, "magic") || get(&c, &s->version, 4, "version"))
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: not a llama.cpp state file (%s)", s->label,
                                c.err);
    if (magic == TQ_GGSN_MAGIC && (s->version == 9 || s->version == 10))
        s->kind = TQ_KV_SESSION;
    else if (magic == TQ_GGSQ_MAGIC && (s->version == 2 || s->version == 3))
        s->kind = TQ_KV_SEQUENCE;
    else if (magic == TQ_GGSN_MAGIC || magic == TQ_GGSQ_MAGIC)
        return tq_ctx_set_error(
            ctx, TQ_ERR_FORMAT,
            "%s: %s version %u is not supported (session v9-10 and sequence v2-3 are)", s->label,
            magic == TQ_GGSN_MAGIC ? "session" : "sequence", s->version);
    else
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: not a llama.cpp state file (magic %08x)",
                                s->label, magic);
    if (get(&c, &s->n_tokens, 4, "token count"))
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: %s", s->label, c.err);
    if (s->n_tokens > (c.size - c.pos) / 4)
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: %u tokens cannot fit in the file",
                                s->label, s->n_tokens);
    s->tokens = malloc(4ull * s->n_tokens + 4);
    if (!s->tokens) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    get(&c, s->tokens, 4ull * s->n_tokens, "tokens");
    if (s->kind == TQ_KV_SESSION) {
        uint32_t len = 0;
        if (get(&c, &len, 4, "architecture") || len > 256 || len > c.size - c.pos)
            return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: bad architecture name (%s)", s->label,
                                    c.err[0] ? c.err : "too long");
        s->arch = malloc(len + 1);
        if (!s->arch) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
        memcpy(s->arch, c.p + c.pos, len);
        s->arch[len] = 0;
        c.pos += len;
    } else {
        s->arch = strdup("");
    }
    uint64_t start = c.pos;
    char first_err[256] = "";
    /* hypotheses, most common first: new layout; M-RoPE extensions; old outputs section */
    for (int h = 0; h < 4; h++) {
        int ext = h & 1, outputs = h >> 1;
        if (outputs && s->kind != TQ_KV_SESSION) break;
        c.pos = start;
        c.err[0] = 0;
        tq_kv_view_reset_states(s);
        if ((outputs && parse_outputs(&c, s->n_tokens)) || parse_memory(&c, s, ext)) {
            if (!first_err[0]) memcpy(first_err, c.err, sizeof first_err);
            continue;
        }
        s->has_ext = ext;
        s->has_outputs = outputs;
        s->prefix_len = start;
        if (outputs) { /* the outputs section is part of the verbatim prefix */
            cur o = {s->map, s->size, start, ""};
            parse_outputs(&o, s->n_tokens);
            s->prefix_len = o.pos;
        }
        return TQ_OK;
    }
    tq_kv_view_reset_states(s);
    return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: KV state not understood: %s", s->label,
                            first_err);
}

static int probe(const uint8_t *p, uint64_t size)
{
    uint32_t magic;
    if (size < 4) return 0;
    memcpy(&magic, p, 4);
    return magic == TQ_GGSN_MAGIC || magic == TQ_GGSQ_MAGIC ? 100 : 0;
}

static tq_status open_state(tq_ctx *ctx, tq_kv_view *v, uint64_t max_bytes)
{
    (void)max_bytes; /* the rows are read in place: nothing expands */
    return parse(ctx, v);
}

const tq_kv_source tq_kv_source_llama_state = {"llama.cpp state", probe, open_state};
