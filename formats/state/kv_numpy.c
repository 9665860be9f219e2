/* kv_numpy.c - NumPy K/V dumps (.npy, .npz) as a KV source (see NUMPY.md);
 * kv_numpy_write.c writes any KV view as an .npz.
 *
 * A dump is read once into a "NumPy image": its arrays in order, each as
 * name + .npy member, with the K/V arrays' data stored cell-major (token
 * rows), so that the snapshot code sees rows exactly as in a llama.cpp
 * state file and the skeleton holds everything else verbatim.  Which arrays
 * are K/V is derived from names and headers alone, by the same function for
 * the dump and for an image rebuilt from a snapshot, so the two cannot
 * disagree. */
#include "file_io.h"
#include "kv_numpy.h"
#include "kv_numpy_impl.h"

#include <archive.h>
#include <archive_entry.h>
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void info_free(void *p)
{
    tq_numpy_info *n = p;
    if (!n) return;
    for (uint32_t i = 0; i < n->n; i++) free(n->e[i].name);
    free(n->e);
    free(n);
}

static int is_dump(const uint8_t *p, uint64_t size)
{
    return size >= 6 && (!memcmp(p, "\x93NUMPY", 6) || !memcmp(p, "PK\x03\x04", 4) ||
                         !memcmp(p, "PK\x05\x06", 4));
}

/* A dump, or the image of one that a snapshot decoded. */
static int probe(const uint8_t *p, uint64_t size)
{
    return is_dump(p, size) || (size >= 4 && !memcmp(p, "TQNI", 4)) ? 100 : 0;
}

/* ------------------------------------------------------------ classification */

static int is_role_word(const char *w, int *role)
{
    static const char *const k[] = {"k", "key", "keys"}, *const v[] = {"v", "value", "values"};
    for (int i = 0; i < 3; i++) {
        if (!strcmp(w, k[i])) {
            *role = ROLE_K;
            return 1;
        }
        if (!strcmp(w, v[i])) {
            *role = ROLE_V;
            return 1;
        }
    }
    return 0;
}

/* "k_3", "layer3.v", "past_key_values.3.key": the name's words split at
 * punctuation and letter/digit boundaries; exactly one number (the layer)
 * and a role word, the last one counting. */
static int role_from_name(const char *name, uint32_t *layer)
{
    size_t len = strlen(name);
    if (len >= 4 && !strcmp(name + len - 4, ".npy")) len -= 4;
    int role = 0, numbers = 0;
    uint64_t num = 0;
    for (size_t i = 0; i < len;) {
        if (!isalnum((unsigned char)name[i])) {
            i++;
            continue;
        }
        int digit = isdigit((unsigned char)name[i]) != 0;
        char w[32];
        size_t n = 0;
        while (i < len && isalnum((unsigned char)name[i]) &&
               (isdigit((unsigned char)name[i]) != 0) == digit) {
            if (n + 1 < sizeof w) w[n++] = (char)tolower((unsigned char)name[i]);
            i++;
        }
        w[n] = 0;
        if (digit) {
            numbers++;
            num = n < 10 ? strtoull(w, NULL, 10) : UINT64_MAX;
        } else {
            int r;
            if (is_role_word(w, &r)) role = r;
        }
    }
    if (!role || numbers != 1 || num >= MAX_LAYERS) return ROLE_OTHER;
    *layer = (uint32_t)num;
    return role;
}

static int base_is(const char *name, const char *what)
{
    size_t len = strlen(name), w = strlen(what);
    if (len >= 4 && !strcmp(name + len - 4, ".npy")) len -= 4;
    return len == w && !strncmp(name, what, w);
}

int tq_np_is_float(const tq_npy_header *h)
{
    return !strcmp(h->descr, "<f4") || !strcmp(h->descr, "<f2");
}

/* Decides what an array is from its name and header; -1 with a reason for
 * an array that is named like K/V but cannot be one. */
static int classify(np_entry *e, char *err, size_t errlen)
{
    const tq_npy_header *h = &e->h;
    uint32_t layer = 0;
    int role = role_from_name(e->name, &layer);
    e->role = ROLE_OTHER;
    if (h->itemsize && h->count * h->itemsize != e->data_len) {
        snprintf(err, errlen, "array %s: %" PRIu64 " data bytes for %" PRIu64 " elements of %s",
                 e->name, e->data_len, h->count, h->descr);
        return -1;
    }
    const uint64_t *s = h->shape;
    if (role == ROLE_OTHER && tq_np_is_float(h) &&
        ((h->ndim == 5 && s[1] == 2) || (h->ndim == 6 && s[1] == 2 && s[2] == 1)))
        role = ROLE_STACK;
    if (role == ROLE_OTHER) {
        if ((base_is(e->name, "tokens") || base_is(e->name, "token_ids") ||
             base_is(e->name, "input_ids")) &&
            (!strcmp(h->descr, "<i4") || !strcmp(h->descr, "<i8")) && !h->fortran_order &&
            (h->ndim == 1 || (h->ndim == 2 && s[0] == 1)) && h->count <= INT32_MAX)
            e->role = ROLE_TOKENS;
        return 0;
    }
    const char *why = NULL;
    if (!tq_np_is_float(h))
        why = "dtype is not float32 or float16 (<f4, <f2)";
    else if (h->fortran_order)
        why = "Fortran order (save it C-contiguous)";
    else if (role == ROLE_STACK) {
        if (h->ndim == 5) {
            e->cells = s[2];
            e->heads = s[3];
            e->head_dim = s[4];
        } else {
            e->cells = s[4];
            e->heads = s[3];
            e->head_dim = s[5];
            e->head_major = 1;
        }
        if (!s[0] || s[0] > MAX_LAYERS) why = "layer count out of range";
    } else if (h->ndim == 2) {
        e->cells = s[0];
        e->heads = 1;
        e->head_dim = s[1];
    } else if (h->ndim == 3) {
        e->cells = s[0];
        e->heads = s[1];
        e->head_dim = s[2];
    } else if (h->ndim == 4) {
        e->cells = s[2];
        e->heads = s[1];
        e->head_dim = s[3];
        e->head_major = 1;
        if (s[0] != 1)
            why = "a batch of more than one sequence ([B, heads, tokens, head_dim] with B > 1)";
    } else {
        why = "shape is not [tokens, width], [tokens, heads, head_dim] or [1, heads, tokens, "
              "head_dim]";
    }
    if (!why && (!e->cells || !e->heads || !e->head_dim || e->cells > UINT32_MAX))
        why = "an empty or oversized dimension";
    if (why) {
        snprintf(err, errlen, "array %s: %s", e->name, why);
        return -1;
    }
    if (e->head_major && h->ndim == 4 && e->heads == 1)
        e->head_major = 0; /* one head: the same bytes */
    e->role = role;
    e->layer = layer;
    e->width = e->heads * e->head_dim;
    return 0;
}

/* [heads, cells, head_dim] <-> [cells, heads, head_dim] for one tensor. */
int tq_np_permute(uint8_t *p, uint64_t cells, uint64_t heads, uint64_t hd, uint64_t es,
                  int to_cell_major)
{
    uint64_t n = cells * heads * hd * es, run = hd * es;
    uint8_t *tmp = malloc(n ? n : 1);
    if (!tmp) return -1;
    memcpy(tmp, p, n);
    for (uint64_t h = 0; h < heads; h++)
        for (uint64_t c = 0; c < cells; c++) {
            uint64_t hm = (h * cells + c) * run, cm = (c * heads + h) * run;
            memcpy(p + (to_cell_major ? cm : hm), tmp + (to_cell_major ? hm : cm), run);
        }
    free(tmp);
    return 0;
}

/* The tensors of a K/V entry: one, or 2 x layers for a stack. */
uint64_t tq_np_n_tensors(const np_entry *e)
{
    return e->role == ROLE_STACK ? 2 * e->h.shape[0] : 1;
}
uint64_t tq_np_tensor_bytes(const np_entry *e) { return e->cells * e->width * e->h.itemsize; }

/* ------------------------------------------------------------ dump -> image */

typedef struct buf {
    uint8_t *p;
    uint64_t len, cap, limit;
} buf;

static int reserve(buf *b, uint64_t more)
{
    if (more <= b->cap - b->len) return 0;
    if (more > UINT64_MAX / 2 - b->len) return -1;
    uint64_t cap = b->cap ? b->cap : 1 << 16;
    while (cap - b->len < more) cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

static int put(buf *b, const void *p, uint64_t n)
{
    if (reserve(b, n)) return -1;
    memcpy(b->p + b->len, p, n);
    b->len += n;
    return 0;
}

/* Makes the K/V data of the member that starts at b->p + off cell-major. */
static tq_status member_done(tq_ctx *ctx, buf *b, uint64_t name_off, uint64_t off,
                             const char *label)
{
    np_entry e;
    memset(&e, 0, sizeof e);
    char err[256];
    uint32_t nl;
    memcpy(&nl, b->p + name_off, 4);
    char name[MAX_NAME + 1];
    memcpy(name, b->p + name_off + 4, nl);
    name[nl] = 0;
    e.name = name;
    if (tq_npy_parse(b->p + off, b->len - off, &e.h, err, sizeof err))
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: array %s: %s", label, name, err);
    e.data_off = off + e.h.header_len;
    e.data_len = b->len - e.data_off;
    if (classify(&e, err, sizeof err))
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: %s", label, err);
    if ((e.role == ROLE_K || e.role == ROLE_V || e.role == ROLE_STACK) && e.head_major)
        for (uint64_t t = 0; t < tq_np_n_tensors(&e); t++)
            if (tq_np_permute(b->p + e.data_off + t * tq_np_tensor_bytes(&e), e.cells, e.heads,
                              e.head_dim, e.h.itemsize, 1))
                return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    return TQ_OK;
}

static tq_status begin_member(tq_ctx *ctx, buf *b, const char *name, uint64_t *name_off,
                              uint64_t *len_off)
{
    size_t nl = strlen(name);
    if (!nl || nl > MAX_NAME)
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "an array name of %zu bytes", nl);
    uint32_t n32 = (uint32_t)nl;
    uint64_t zero = 0;
    *name_off = b->len;
    if (put(b, &n32, 4) || put(b, name, nl))
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    *len_off = b->len;
    if (put(b, &zero, 8)) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    return TQ_OK;
}

static void end_member(buf *b, uint64_t len_off)
{
    uint64_t n = b->len - len_off - 8;
    memcpy(b->p + len_off, &n, 8);
}

static tq_status from_npz(tq_ctx *ctx, const uint8_t *p, uint64_t size, const char *label, buf *b,
                          uint32_t *count)
{
    struct archive *a = archive_read_new();
    if (!a) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    archive_read_support_format_zip_seekable(a);
    tq_status st = TQ_OK;
    if (archive_read_open_memory(a, p, size) != ARCHIVE_OK) {
        st = tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: not a readable .npz (%s)", label,
                              archive_error_string(a));
        archive_read_free(a);
        return st;
    }
    struct archive_entry *ae;
    int r;
    while (!st && (r = archive_read_next_header(a, &ae)) == ARCHIVE_OK) {
        if (archive_entry_filetype(ae) == AE_IFDIR) continue;
        const char *name = archive_entry_pathname(ae);
        if (!name) {
            st = tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: a .npz member without a name", label);
            break;
        }
        if (++*count > MAX_ENTRIES) {
            st =
                tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: more than %d arrays", label, MAX_ENTRIES);
            break;
        }
        uint64_t name_off, len_off;
        if ((st = begin_member(ctx, b, name, &name_off, &len_off))) break;
        uint64_t start = b->len;
        for (;;) {
            if (reserve(b, 1 << 20)) {
                st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
                break;
            }
            uint64_t room = b->cap - b->len;
            if (b->limit && room > b->limit - b->len + 1) room = b->limit - b->len + 1;
            la_ssize_t n = archive_read_data(a, b->p + b->len, (size_t)room);
            if (n < 0) {
                st = tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: array %s: %s", label, name,
                                      archive_error_string(a));
                break;
            }
            if (!n) break;
            b->len += (uint64_t)n;
            if (b->limit && b->len > b->limit) {
                st = tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED,
                                      "%s: arrays larger than the %" PRIu64 "-byte limit", label,
                                      b->limit);
                break;
            }
        }
        if (!st) {
            end_member(b, len_off);
            if (b->len == start)
                st = tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: array %s is empty", label, name);
        }
        if (!st) st = member_done(ctx, b, name_off, start, label);
    }
    if (!st && r != ARCHIVE_EOF)
        st = tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: not a readable .npz (%s)", label,
                              archive_error_string(a));
    archive_read_free(a);
    return st;
}

static tq_status build_image(tq_ctx *ctx, const uint8_t *p, uint64_t size, const char *label,
                             uint64_t max_bytes, uint8_t **img, uint64_t *img_size)
{
    *img = NULL;
    buf b = {NULL, 0, 0, 0};
    uint32_t count = 0, version = 1, zero = 0;
    tq_status st = TQ_OK;
    if (put(&b, "TQNI", 4) || put(&b, &version, 4) || put(&b, &zero, 4) || put(&b, &zero, 4)) {
        free(b.p);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    if (max_bytes) b.limit = max_bytes + b.len;
    if (!memcmp(p, "\x93NUMPY", 6)) { /* one array: a stack of all layers */
        uint64_t name_off, len_off;
        count = 1;
        if (max_bytes && size > max_bytes)
            st = tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED, "%s: larger than the limit", label);
        if (!st) st = begin_member(ctx, &b, "kv.npy", &name_off, &len_off);
        uint64_t start = b.len;
        if (!st && put(&b, p, size)) st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
        if (!st) {
            end_member(&b, len_off);
            st = member_done(ctx, &b, name_off, start, label);
        }
    } else {
        st = from_npz(ctx, p, size, label, &b, &count);
    }
    if (st) {
        free(b.p);
        return st;
    }
    memcpy(b.p + 8, &count, 4);
    *img = b.p;
    *img_size = b.len;
    return TQ_OK;
}

/* ------------------------------------------------------------ image -> KV view */

static tq_status bad(tq_ctx *ctx, const tq_kv_view *s, const char *what)
{
    return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: %s", s->label, what);
}

/* The image's arrays, each classified (K, V, stack, tokens or other). */
static tq_status parse_arrays(tq_ctx *ctx, tq_kv_view *s, tq_numpy_info **out)
{
    const uint8_t *p = s->map;
    uint64_t size = s->size, pos = IMG_HDR;
    uint32_t version, n, reserved;
    char err[320];
    if (size < IMG_HDR) return bad(ctx, s, "truncated NumPy image");
    memcpy(&version, p + 4, 4);
    memcpy(&n, p + 8, 4);
    memcpy(&reserved, p + 12, 4);
    if (version != 1 || reserved) return bad(ctx, s, "NumPy image of an unknown version");
    if (n > MAX_ENTRIES || n > (size - pos) / 12)
        return bad(ctx, s, "NumPy image with an implausible array count");
    tq_numpy_info *info = calloc(1, sizeof *info);
    if (!info || !(info->e = calloc(n ? n : 1, sizeof *info->e))) {
        free(info);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    s->source_data = info;
    s->source_free = info_free;
    *out = info;
    s->kind = TQ_KV_NUMPY;
    s->version = 1;
    if (!(s->arch = strdup(""))) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < n; i++) {
        np_entry *e = &info->e[info->n];
        uint32_t nl;
        uint64_t ml;
        if (size - pos < 4) return bad(ctx, s, "truncated NumPy image");
        memcpy(&nl, p + pos, 4);
        pos += 4;
        if (!nl || nl > MAX_NAME || nl > size - pos || memchr(p + pos, 0, nl))
            return bad(ctx, s, "bad array name in the NumPy image");
        if (!(e->name = malloc(nl + 1)))
            return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
        info->n++;
        memcpy(e->name, p + pos, nl);
        e->name[nl] = 0;
        pos += nl;
        if (size - pos < 8) return bad(ctx, s, "truncated NumPy image");
        memcpy(&ml, p + pos, 8);
        pos += 8;
        if (ml > size - pos) return bad(ctx, s, "truncated NumPy image");
        e->member_off = pos;
        if (tq_npy_parse(p + pos, ml, &e->h, err, sizeof err)) {
            char m[400];
            snprintf(m, sizeof m, "array %s: %s", e->name, err);
            return bad(ctx, s, m);
        }
        e->data_off = pos + e->h.header_len;
        e->data_len = ml - e->h.header_len;
        if (classify(e, err, sizeof err)) return bad(ctx, s, err);
        for (uint32_t j = 0; j < i; j++)
            if (!strcmp(info->e[j].name, e->name))
                return bad(ctx, s, "two arrays with the same name");
        pos += ml;
    }
    if (pos != size) return bad(ctx, s, "bytes after the last array of the NumPy image");

    return TQ_OK;
}

/* The KV view over the arrays: per-layer K/V arrays or one stack, never
 * both; *tokens_out is the tokens array if there is one. */
static tq_status build_layers(tq_ctx *ctx, tq_kv_view *s, tq_numpy_info *info,
                              const np_entry **tokens_out)
{
    const uint8_t *p = s->map;
    uint32_t n = info->n;
    uint32_t n_layer = 0, stacks = 0, per_layer = 0;
    uint64_t cells = 0, head_dim = 0;
    int heads_shown = 1; /* every K/V array shows its heads: [.., heads, head_dim] */
    const np_entry *tokens = NULL;
    for (uint32_t i = 0; i < n; i++) {
        const np_entry *e = &info->e[i];
        if (e->role == ROLE_TOKENS && !tokens) tokens = e;
        if (e->role == ROLE_OTHER || e->role == ROLE_TOKENS) continue;
        if (cells && e->cells != cells)
            return bad(ctx, s, "K/V arrays with different token counts");
        cells = e->cells;
        if (e->role != ROLE_STACK && e->h.ndim == 2) heads_shown = 0;
        if (head_dim && e->head_dim != head_dim) heads_shown = 0;
        head_dim = e->head_dim;
        if (e->role == ROLE_STACK) {
            stacks++;
            n_layer = (uint32_t)e->h.shape[0];
        } else {
            per_layer++;
            n_layer = e->layer + 1 > n_layer ? e->layer + 1 : n_layer;
        }
    }
    if (!stacks && !per_layer)
        return bad(ctx, s,
                   "no K/V arrays (expected k_0, v_0, ... or one [layers, 2, tokens, heads, "
                   "head_dim] array; "
                   "see tq-encode-kvdump(1))");
    if (stacks > 1 || (stacks && per_layer))
        return bad(ctx, s, "K/V given both as a stacked array and per layer");
    if (per_layer && per_layer != 2 * n_layer)
        return bad(ctx, s, "K/V arrays missing or repeated for some layers");
    tq_kv_stream *st = calloc(1, sizeof *st);
    if (!st) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    s->n_kv = 1;
    s->kv[0].n_stream = 1;
    s->kv[0].streams = st;
    st->cell_count = (uint32_t)cells;
    st->n_layer = n_layer;
    st->k = calloc(n_layer, sizeof *st->k);
    st->v = calloc(n_layer, sizeof *st->v);
    if (!st->k || !st->v) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    info->n_layer = n_layer;
    s->head_dim = heads_shown && head_dim <= UINT32_MAX ? (uint32_t)head_dim : 0;
    s->prefix_len = UINT64_MAX;
    for (uint32_t i = 0; i < n; i++) {
        const np_entry *e = &info->e[i];
        if (e->role == ROLE_OTHER || e->role == ROLE_TOKENS) continue;
        for (uint64_t t = 0; t < tq_np_n_tensors(e); t++) {
            int is_v = e->role == ROLE_STACK ? (int)(t & 1) : e->role == ROLE_V;
            uint32_t l = e->role == ROLE_STACK ? (uint32_t)(t / 2) : e->layer;
            tq_kv_tensor *kt = is_v ? &st->v[l] : &st->k[l];
            if (kt->type) return bad(ctx, s, "K/V arrays repeated for a layer");
            kt->type = tq_ggml_type_get(s->profile, e->h.itemsize == 4 ? 0 : 1);
            kt->width = e->width;
            kt->row_size = e->width * e->h.itemsize;
            kt->bytes = tq_np_tensor_bytes(e);
            kt->data_off = e->data_off + t * kt->bytes;
            kt->data = p + kt->data_off;
            if (kt->data_off < s->prefix_len) s->prefix_len = kt->data_off;
        }
    }
    *tokens_out = tokens;
    return TQ_OK;
}

static tq_status read_tokens(tq_ctx *ctx, tq_kv_view *s, const np_entry *tokens)
{
    const uint8_t *p = s->map;
    if (tokens) {
        uint64_t nt = tokens->h.count;
        if (!(s->tokens = malloc(4 * nt + 4)))
            return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
        for (uint64_t i = 0; i < nt; i++) {
            int64_t v;
            if (tokens->h.itemsize == 4) {
                int32_t v32;
                memcpy(&v32, p + tokens->data_off + 4 * i, 4);
                v = v32;
            } else {
                memcpy(&v, p + tokens->data_off + 8 * i, 8);
            }
            if (v < INT32_MIN || v > INT32_MAX)
                return bad(ctx, s, "a token id out of the int32 range");
            s->tokens[i] = (int32_t)v;
        }
        s->n_tokens = (uint32_t)nt;
    } else if (!(s->tokens = malloc(4))) {
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    return TQ_OK;
}

static tq_status parse_image(tq_ctx *ctx, tq_kv_view *s)
{
    tq_numpy_info *info = NULL;
    const np_entry *tokens = NULL;
    tq_status st = parse_arrays(ctx, s, &info);
    if (!st) st = build_layers(ctx, s, info, &tokens);
    if (!st) st = read_tokens(ctx, s, tokens);
    return st;
}

/* A dump is read into an image that replaces the file's bytes; an image is
 * read as it is. */
static tq_status open_numpy(tq_ctx *ctx, tq_kv_view *v, uint64_t max_bytes)
{
    if (is_dump(v->map, v->size)) {
        uint8_t *img;
        uint64_t n = 0;
        tq_status st = build_image(ctx, v->map, v->size, v->label, max_bytes, &img, &n);
        if (st) return st;
        if (v->mapped) tq_unmap_file(v->map, v->size);
        v->mapped = 0;
        v->owned = 1;
        v->map = img;
        v->size = n;
    } else if (v->size < 4 || memcmp(v->map, "TQNI", 4)) {
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: not a NumPy .npy/.npz dump", v->label);
    }
    return parse_image(ctx, v);
}

const tq_kv_source tq_kv_source_numpy = {"NumPy", probe, open_numpy};

tq_status tq_numpy_open_memory(tq_ctx *ctx, const void *data, size_t size, const char *label,
                               uint64_t max_bytes, tq_kv_view **out)
{
    return tq_kv_view_open_with(ctx, &tq_kv_source_numpy, data, size, label, TQ_PROFILE_DEFAULT,
                           max_bytes, out);
}
