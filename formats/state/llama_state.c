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
#define MAX_SEQ          256 /* LLAMA_MAX_SEQ (src/llama-cparams.h): seq ids below it */

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

/* A cell's n_seq sequence ids: each below MAX_SEQ and after the one before, as llama.cpp
 * writes them (state_write_meta: ascending) */
static int seq_ids(cur *c, uint32_t nseq, const char *what, uint32_t cell)
{
    int32_t last = -1;
    for (uint32_t k = 0; k < nseq; k++) {
        int32_t id = 0;
        if (get(c, &id, 4, what)) return -1;
        if (id <= last || id >= MAX_SEQ)
            return fail(c, "cell %u: sequence id %d after %d (ids ascend below %d)", cell, id,
                        last, MAX_SEQ);
        last = id;
    }
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

static int parse_vs(cur *c, tq_type_profile prof, tq_kv_stream *st, int no_v)
{
    for (uint32_t il = 0; !no_v && il < st->n_layer; il++) {
        if (st->v_trans ? parse_vtrans(c, prof, st->cell_count, (int)il, &st->v[il])
                        : parse_tensor(c, prof, st->cell_count, (int)il, "V", &st->v[il]))
            return -1;
    }
    return 0;
}

/* A sparse-attention cache's indexer keys (llama-kv-cache.cpp, state_write_data, after the K
 * records): u32 1, then per layer u32 has (0 or 1) and, where 1, a record as K's. */
static int parse_k_idx(cur *c, tq_type_profile prof, tq_kv_stream *st)
{
    uint32_t one = 0;
    if (get(c, &one, 4, "k_idx marker")) return -1;
    if (one != 1) return fail(c, "k_idx marker %u (llama.cpp writes 1)", one);
    st->k_idx = calloc(st->n_layer, sizeof *st->k_idx);
    if (!st->k_idx) return fail(c, "out of memory");
    for (uint32_t il = 0; il < st->n_layer; il++) {
        uint32_t has = 0;
        if (get(c, &has, 4, "k_idx layer flag")) return -1;
        if (has > 1) return fail(c, "layer %u k_idx flag %u is not 0 or 1", il, has);
        if (has && parse_tensor(c, prof, st->cell_count, (int)il, "k_idx", &st->k_idx[il]))
            return -1;
    }
    return 0;
}

/* One KV memory state: ext the bytes of each cell's extension, no_v an MLA cache's (K
 * records alone: llama.cpp writes no V for a latent cache, and nothing says so). */
static int parse_kv_state(cur *c, tq_type_profile prof, int ext, int no_v, tq_kv_state *k)
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
            if (nseq > MAX_SEQ)
                return fail(c, "stream %u cell %u: %u sequence ids", s, i, nseq);
            if ((ext && skip(c, (uint64_t)ext, "cell extension")) ||
                seq_ids(c, nseq, "cell seq ids", i))
                return -1;
        }
        st->meta_len = c->pos - st->meta_off;
        if (get(c, &st->v_trans, 4, "v_trans") || get(c, &st->n_layer, 4, "n_layer")) return -1;
        if (st->v_trans > 1) return fail(c, "stream %u: v_trans %u is not 0 or 1", s, st->v_trans);
        if (!st->n_layer || st->n_layer > MAX_LAYERS)
            return fail(c, "stream %u: %u layers", s, st->n_layer);
        st->k = calloc(st->n_layer, sizeof *st->k);
        st->v = no_v ? NULL : calloc(st->n_layer, sizeof *st->v);
        if (!st->k || (!no_v && !st->v)) return fail(c, "out of memory");
        for (uint32_t il = 0; il < st->n_layer; il++)
            if (parse_tensor(c, prof, st->cell_count, (int)il, "K", &st->k[il])) return -1;
        uint64_t after_k = c->pos;
        if (parse_vs(c, prof, st, no_v)) { /* or a k_idx section first */
            char v_err[256];
            memcpy(v_err, c->err, sizeof v_err);
            c->pos = after_k;
            c->err[0] = 0;
            if (parse_k_idx(c, prof, st) || parse_vs(c, prof, st, no_v)) {
                memcpy(c->err, v_err, sizeof v_err);
                return -1;
            }
        }
    }
    return 0;
}

/* A recurrent memory's state (llama-memory-recurrent.cpp, state_write): u32 cell count; per
 * cell i32 pos, u32 n_seq, n_seq x i32 seq id; u32 s_trans (0); u32 n_layer (all the model's
 * layers); then a record (i32 type, u64 row size, cell count rows) for the R tensor of each
 * layer with state, then one for its S tensor (row size 0: none, as lfm2's convolutions).
 * Which layers have state the file does not say: the records run to the end of the file,
 * two a layer. */
static int parse_recurrent(cur *c, tq_type_profile prof, tq_kv_recurrent *r)
{
    r->off = c->pos;
    if (get(c, &r->cell_count, 4, "recurrent cell count")) return -1;
    if (r->cell_count > (c->size - c->pos) / 8)
        return fail(c, "recurrent state: cell count %u cannot fit in the file", r->cell_count);
    for (uint32_t i = 0; i < r->cell_count; i++) {
        int32_t pos = 0;
        uint32_t nseq = 0;
        if (get(c, &pos, 4, "recurrent cell pos") || get(c, &nseq, 4, "recurrent seq count"))
            return -1;
        if (nseq > MAX_SEQ)
            return fail(c, "recurrent cell %u: %u sequence ids", i, nseq);
        if (seq_ids(c, nseq, "recurrent seq ids", i)) return -1;
    }
    uint32_t trans = 0;
    if (get(c, &trans, 4, "s_trans") || get(c, &r->n_layer, 4, "recurrent n_layer")) return -1;
    if (trans) return fail(c, "recurrent state: s_trans %u (llama.cpp writes 0)", trans);
    if (!r->n_layer || r->n_layer > MAX_LAYERS)
        return fail(c, "recurrent state: %u layers", r->n_layer);
    while (c->pos < c->size) {
        int32_t type = 0;
        uint64_t rs = 0;
        if (get(c, &type, 4, "recurrent type") || get(c, &rs, 8, "recurrent row size")) return -1;
        const tq_ggml_type *t = tq_ggml_type_get(prof, type);
        if (!t) return fail(c, "recurrent record %u: type id %d unknown", r->n_records, type);
        if (t->dtype != TQ_DT_F32) /* llama.cpp keeps r and s in f32 (llama-model.cpp) */
            return fail(c, "recurrent record %u: %s rows (llama.cpp writes f32)", r->n_records,
                        t->name);
        if (rs % t->bytes)
            return fail(c, "recurrent record %u: row size %" PRIu64 " is not whole %s blocks",
                        r->n_records, rs, t->name);
        if (r->cell_count && rs > (c->size - c->pos) / r->cell_count)
            return fail(c, "recurrent record %u: rows run past the end", r->n_records);
        c->pos += rs * r->cell_count;
        r->state_bytes += rs * r->cell_count;
        r->n_records++;
    }
    if (!r->n_records || r->n_records % 2 || r->n_records / 2 > r->n_layer)
        return fail(c, "recurrent state: %u tensor records for %u layers", r->n_records,
                    r->n_layer);
    r->len = c->pos - r->off;
    return 0;
}

/* The memory from c->pos to the end of the file, exactly: KV states (two for iSWA), then a
 * recurrent state (hybrid models), or a recurrent state alone. */
static int parse_memory(cur *c, tq_kv_view *s, int ext, int no_v)
{
    s->n_kv = 0;
    s->has_recurrent = 0;
    memset(&s->rec, 0, sizeof s->rec);
    while (c->pos < c->size) {
        uint64_t at = c->pos;
        if (s->n_kv < TQ_KV_MAX_STATES &&
            !parse_kv_state(c, s->profile, ext, no_v, &s->kv[s->n_kv])) {
            s->n_kv++;
            continue;
        }
        char kv_err[256];
        memcpy(kv_err, c->err, sizeof kv_err);
        uint64_t kv_pos = c->pos;
        c->pos = at;
        c->err[0] = 0;
        if (!parse_recurrent(c, s->profile, &s->rec)) {
            s->has_recurrent = 1;
            /* a hybrid model's layers are attention or recurrent: two records for every
               layer the KV states do not hold (which a cut at a record's end would break) */
            uint32_t kv_layers = 0;
            int known = 1; /* alone, every layer is recurrent */
            for (uint32_t i = 0; i < s->n_kv; i++) {
                const tq_kv_stream *st = tq_kv_state_stream(&s->kv[i]);
                known &= st->cell_count > 0;
                kv_layers += st->n_layer;
            }
            if (known && (kv_layers > s->rec.n_layer ||
                          s->rec.n_records != 2 * (s->rec.n_layer - kv_layers)))
                return fail(c,
                            "recurrent state: %u tensor records where %u layers, %u of them "
                            "attention, leave %u",
                            s->rec.n_records, s->rec.n_layer, kv_layers,
                            kv_layers > s->rec.n_layer ? 0 : 2 * (s->rec.n_layer - kv_layers));
            break;
        }
        /* neither: the complaint of the reading that got further (a truncated hybrid file:
           the recurrent one's) */
        if (kv_err[0] && kv_pos >= c->pos) {
            memcpy(c->err, kv_err, sizeof kv_err);
            c->pos = kv_pos;
        }
        if (!kv_err[0] && c->pos <= at + 12) { /* two KV states and then what is not one */
            c->err[0] = 0;
            c->pos = at;
            return fail(c, "%" PRIu64 " bytes after the KV state(s) that tq does not understand",
                        c->size - at);
        }
        return -1;
    }
    /* nothing at all: a context whose caches share another's cells (llama-kv-cache.cpp,
       state_write: a cache with `other` writes nothing, as a Gemma 4 assistant's) */
    if (!s->n_kv && !s->has_recurrent && c->pos != c->size) return fail(c, "no KV state");
    return 0;
}

/* The old (pre-February-2026) outputs section of session files. */
/* llama-server (since its multimodal prompts) saves a slot's tokens packed: LLAMA_TOKEN_NULL
 * (-1), the version 1, the count c, the c tokens, the count of media chunks, then the chunks
 * (LLAMA_STATE.md, "llama-server's packed tokens").  A text prompt's (no media) are unpacked:
 * the view's tokens are the prompt's, so that a token prefix and an appended snapshot count
 * them; the writer packs them again. */
static void unpack_server_tokens(tq_kv_view *s)
{
    uint32_t n = s->n_tokens;
    const int32_t *t = s->tokens;
    if (n < 4 || t[0] != -1 || t[1] != 1 || (uint32_t)t[2] != n - 4 || t[n - 1] != 0) return;
    memmove(s->tokens, s->tokens + 3, 4ull * (n - 4));
    s->n_tokens = n - 4;
    s->tokens_packed = 1;
}

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

/* Whether p starts as llama_state_get_data writes (llama-context.cpp, state_write_data): u32
 * length and an architecture name of letters, digits, '-' and '_', then the memory: what
 * Llama.save_state() keeps, which has no magic. */
static int looks_like_state_data(const uint8_t *p, uint64_t size)
{
    uint32_t len;
    if (size < 8) return 0;
    memcpy(&len, p, 4);
    if (!len || len > 64) return 0;
    for (uint32_t i = 0; i < len && 4 + i < size; i++) { /* the name's bytes at hand */
        uint8_t ch = p[4 + i];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '_';
        if (!ok) return 0;
    }
    return 1;
}

/* The file's kind from its magic and version, or the message for what it is instead. */
static tq_status read_kind(tq_ctx *ctx, tq_kv_view *s, uint32_t magic)
{
    if (magic == TQ_GGSN_MAGIC && (s->version == 9 || s->version == 10)) {
        s->kind = TQ_KV_SESSION;
        return TQ_OK;
    }
    if (magic == TQ_GGSQ_MAGIC && (s->version == 2 || s->version == 3)) {
        s->kind = TQ_KV_SEQUENCE;
        return TQ_OK;
    }
    if (magic == TQ_GGSN_MAGIC || magic == TQ_GGSQ_MAGIC)
        return tq_ctx_set_error(
            ctx, TQ_ERR_FORMAT,
            "%s: %s version %u is not supported (session v9-10 and sequence v2-3 are)", s->label,
            magic == TQ_GGSN_MAGIC ? "session" : "sequence", s->version);
    if (looks_like_state_data(s->map, s->size))
        return tq_ctx_set_error(
            ctx, TQ_ERR_FORMAT,
            "%s: a llama_state_get_data buffer (what llama-cpp-python's Llama.save_state() "
            "holds: the architecture and the memory, no header or tokens), not a state "
            "file: save it with llama_state_save_file or llama_state_seq_save_file",
            s->label);
    return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: not a llama.cpp state file (magic %08x)",
                            s->label, magic);
}

/* Reads the memory from start under s->profile, trying each layout in turn; 0 or -1 with
 * c->err the complaint of the reading that got furthest. */
static int read_layouts(tq_kv_view *s, cur *c, uint64_t start)
{
    char best_err[256] = ""; /* the complaint of the reading that got furthest (below) */
    uint64_t best_at = 0;
    /* hypotheses, most common first: the plain layout; M-RoPE extensions of 12 bytes (x, y,
       tok: current llama.cpp) or 8 (older); an MLA cache's K without V; the old outputs
       section */
    static const int exts[3] = {0, 12, 8};
    for (int h = 0; h < 12; h++) {
        int ext = exts[h % 3];
        int no_v = (h / 3) & 1;
        int outputs = h / 6;
        if (outputs && s->kind != TQ_KV_SESSION) break;
        c->pos = start;
        c->err[0] = 0;
        tq_kv_view_reset_states(s);
        if ((outputs && parse_outputs(c, s->n_tokens)) || parse_memory(c, s, ext, no_v)) {
            /* another reading's complaint wins only well past the plain one's: a wrong
               reading soon fails (a few cells), the right one of a cut file gets far */
            if (!best_err[0] || c->pos > best_at + 64) {
                memcpy(best_err, c->err, sizeof best_err);
                best_at = c->pos;
            }
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
        return 0;
    }
    tq_kv_view_reset_states(s);
    memcpy(c->err, best_err, sizeof best_err);
    return -1;
}

/* Rows of the first ROWS_LOOKED_AT cells of every tensor of dtype dt, as read now: the count
 * of such tensors; *nonzero set when a turbo4 block's rnorm field (bytes 2-3 of 68) is not 0,
 * which the fork at 69d8e4be4 never writes. */
#define ROWS_LOOKED_AT 64
static int turbo_tensors(const tq_kv_view *s, tq_dtype dt, int *nonzero)
{
    int n = 0;
    for (uint32_t i = 0; i < s->n_kv; i++)
        for (uint32_t j = 0; j < s->kv[i].n_stream; j++) {
            const tq_kv_stream *st = &s->kv[i].streams[j];
            for (uint32_t il = 0; st->cell_count && il < 2 * st->n_layer; il++) {
                const tq_kv_tensor *t = il < st->n_layer ? &st->k[il] : NULL;
                if (!t) t = st->v ? &st->v[il - st->n_layer] : NULL;
                if (!t || t->type->dtype != (int)dt) continue;
                n++;
                uint32_t rows = st->cell_count < ROWS_LOOKED_AT ? st->cell_count : ROWS_LOOKED_AT;
                uint64_t blocks = t->row_size / t->type->bytes;
                for (uint32_t r = 0; nonzero && r < rows; r++)
                    for (uint64_t b = 0; b < blocks; b++) {
                        const uint8_t *blk = t->data + r * t->row_size + b * t->type->bytes;
                        *nonzero |= blk[2] | blk[3];
                    }
            }
        }
    return n;
}

/* How a state tells which fork revision its turbo rows are (69d8e4be4 and pr197 number their
 * types alike): probes in order, each a reading of the state with a revision's types and what
 * the rows must then hold; the first that reads and holds names the revision.  turbo4's blocks
 * tell the two apart (68 bytes with an rnorm field the old fork writes 0; 66 without), by the
 * row size, or where a row holds a multiple of 33 x 68 = 34 x 66 bytes by that field; turbo3's
 * tables cannot be told from the bytes, and the newest is assumed (LLAMA_STATE.md). */
typedef enum probe_holds {
    HOLDS_NO_TURBO34,    /* no turbo3 or turbo4 rows */
    HOLDS_T4_RNORM_ZERO, /* turbo4 rows, every rnorm field 0 */
    HOLDS_T4,            /* turbo4 rows */
    HOLDS_ANY            /* whatever it reads */
} probe_holds;

#define TURBO3_ALONE "turbo3 rows alone: not told by the bytes; the newest assumed"
/* clang-format off */
static const struct {
    const char *revision;
    probe_holds holds;
    const char *how;
} probes[] = {
    /* read as    when it holds         how it was told */
    {"69d8e4be4", HOLDS_NO_TURBO34,    "no turbo3 or turbo4 rows"},
    {"69d8e4be4", HOLDS_T4_RNORM_ZERO, "turbo4 blocks of 68 bytes, rnorm fields 0"},
    {"pr197",     HOLDS_T4,            "turbo4 blocks of 66 bytes"},
    {"pr197",     HOLDS_ANY,           TURBO3_ALONE},
    {"69d8e4be4", HOLDS_ANY,           "turbo4 blocks of 68 bytes"},
};
/* clang-format on */

static int probe_holds_now(const tq_kv_view *s, probe_holds holds)
{
    int rnorm = 0;
    uint32_t p = (uint32_t)s->profile;
    int t4 = turbo_tensors(s, tq_fork_dtype(p, 4), holds == HOLDS_T4_RNORM_ZERO ? &rnorm : NULL);
    int t3 = turbo_tensors(s, tq_fork_dtype(p, 3), NULL);
    switch (holds) {
        case HOLDS_NO_TURBO34:
            return !t3 && !t4;
        case HOLDS_T4_RNORM_ZERO:
            return t4 && !rnorm;
        case HOLDS_T4:
            return t4 > 0;
        default:
            return 1;
    }
}

static int read_revision(tq_kv_view *s, cur *c, uint64_t start)
{
    if (!s->profile_auto) return read_layouts(s, c, start);
    int read_as = -1; /* the revision the layouts were last read with, and whether they read */
    int read_ok = 0;
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        tq_type_profile p;
        if (tq_type_profile_parse(probes[i].revision, &p)) continue;
        if (p != read_as) {
            s->profile = p;
            read_ok = !read_layouts(s, c, start);
            read_as = p;
        }
        if (read_ok && probe_holds_now(s, probes[i].holds)) {
            s->profile_how = probes[i].how;
            return 0;
        }
    }
    s->profile = TQ_PROFILE_NEWEST;
    read_layouts(s, c, start); /* none: the newest reading's complaint */
    return -1;
}

static tq_status parse(tq_ctx *ctx, tq_kv_view *s)
{
    cur c = {s->map, s->size, 0, ""};
    uint32_t magic = 0;
    if (get(&c, &magic, 4, "magic") || get(&c, &s->version, 4, "version"))
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: not a llama.cpp state file (%s)", s->label,
                                c.err);
    tq_status kst = read_kind(ctx, s, magic);
    if (kst) return kst;
    if (get(&c, &s->n_tokens, 4, "token count"))
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: %s", s->label, c.err);
    if (s->n_tokens > (c.size - c.pos) / 4)
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: %u tokens cannot fit in the file",
                                s->label, s->n_tokens);
    s->tokens = malloc(4ull * s->n_tokens + 4);
    if (!s->tokens) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    get(&c, s->tokens, 4ull * s->n_tokens, "tokens");
    unpack_server_tokens(s);
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
    if (read_revision(s, &c, c.pos))
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: KV state not understood: %s", s->label,
                                c.err);
    return TQ_OK;
}

static int probe(const uint8_t *p, uint64_t size)
{
    uint32_t magic;
    if (size < 4) return 0;
    memcpy(&magic, p, 4);
    if (magic == TQ_GGSN_MAGIC || magic == TQ_GGSQ_MAGIC) return 100;
    return looks_like_state_data(p, size) ? 10 : 0; /* to name it in the error */
}

static tq_status open_state(tq_ctx *ctx, tq_kv_view *v, uint64_t max_bytes)
{
    (void)max_bytes; /* the rows are read in place: nothing expands */
    return parse(ctx, v);
}

const tq_kv_source tq_kv_source_llama_state = {"llama.cpp state", probe, open_state};
