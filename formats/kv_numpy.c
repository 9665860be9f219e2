/* kv_numpy.c - NumPy K/V dumps (.npy, .npz) as a KV view, and any KV view
 * written out as an .npz (see NUMPY.md).
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
#include "llama_state_internal.h"
#include "npy.h"
#include "tq_internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define IMG_HDR 16
#define MAX_NAME 4096
#define MAX_LAYERS 4096
#define MAX_ENTRIES 65536

enum { ROLE_OTHER = 0, ROLE_K, ROLE_V, ROLE_STACK, ROLE_TOKENS };

typedef struct np_entry {
    char *name;         /* as stored (".npy" included for npz members) */
    tq_npy_header h;
    uint64_t member_off; /* of the .npy header in the image */
    uint64_t data_off, data_len;
    int role, head_major;
    uint32_t layer;
    uint64_t cells, heads, head_dim, width; /* K/V: per tensor */
} np_entry;

struct tq_numpy_info {
    uint32_t n;
    np_entry *e;
    uint32_t n_layer;
};

void tq_numpy_info_free(tq_numpy_info *n)
{
    if (!n) return;
    for (uint32_t i = 0; i < n->n; i++) free(n->e[i].name);
    free(n->e);
    free(n);
}

int tq_numpy_is_dump(const uint8_t *p, uint64_t size)
{
    return size >= 6 && (!memcmp(p, "\x93NUMPY", 6) || !memcmp(p, "PK\x03\x04", 4) || !memcmp(p, "PK\x05\x06", 4));
}

/* ------------------------------------------------------------ classification */

static int is_role_word(const char *w, int *role)
{
    static const char *const k[] = {"k", "key", "keys"}, *const v[] = {"v", "value", "values"};
    for (int i = 0; i < 3; i++) {
        if (!strcmp(w, k[i])) return *role = ROLE_K, 1;
        if (!strcmp(w, v[i])) return *role = ROLE_V, 1;
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
        while (i < len && isalnum((unsigned char)name[i]) && (isdigit((unsigned char)name[i]) != 0) == digit) {
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

static int is_float(const tq_npy_header *h) { return !strcmp(h->descr, "<f4") || !strcmp(h->descr, "<f2"); }

/* Decides what an array is from its name and header; -1 with a reason for
 * an array that is named like K/V but cannot be one. */
static int classify(np_entry *e, char *err, size_t errlen)
{
    const tq_npy_header *h = &e->h;
    uint32_t layer = 0;
    int role = role_from_name(e->name, &layer);
    e->role = ROLE_OTHER;
    if (h->itemsize && h->count * h->itemsize != e->data_len) {
        snprintf(err, errlen, "array %s: %" PRIu64 " data bytes for %" PRIu64 " elements of %s", e->name, e->data_len,
                 h->count, h->descr);
        return -1;
    }
    const uint64_t *s = h->shape;
    if (role == ROLE_OTHER && is_float(h) && ((h->ndim == 5 && s[1] == 2) || (h->ndim == 6 && s[1] == 2 && s[2] == 1)))
        role = ROLE_STACK;
    if (role == ROLE_OTHER) {
        if ((base_is(e->name, "tokens") || base_is(e->name, "token_ids") || base_is(e->name, "input_ids")) &&
            (!strcmp(h->descr, "<i4") || !strcmp(h->descr, "<i8")) && !h->fortran_order &&
            (h->ndim == 1 || (h->ndim == 2 && s[0] == 1)) && h->count <= INT32_MAX)
            e->role = ROLE_TOKENS;
        return 0;
    }
    const char *why = NULL;
    if (!is_float(h)) why = "dtype is not float32 or float16 (<f4, <f2)";
    else if (h->fortran_order) why = "Fortran order (save it C-contiguous)";
    else if (role == ROLE_STACK) {
        if (h->ndim == 5) e->cells = s[2], e->heads = s[3], e->head_dim = s[4];
        else e->cells = s[4], e->heads = s[3], e->head_dim = s[5], e->head_major = 1;
        if (!s[0] || s[0] > MAX_LAYERS) why = "layer count out of range";
    } else if (h->ndim == 2) {
        e->cells = s[0], e->heads = 1, e->head_dim = s[1];
    } else if (h->ndim == 3) {
        e->cells = s[0], e->heads = s[1], e->head_dim = s[2];
    } else if (h->ndim == 4) {
        e->cells = s[2], e->heads = s[1], e->head_dim = s[3], e->head_major = 1;
        if (s[0] != 1) why = "a batch of more than one sequence ([B, heads, tokens, head_dim] with B > 1)";
    } else {
        why = "shape is not [tokens, width], [tokens, heads, head_dim] or [1, heads, tokens, head_dim]";
    }
    if (!why && (!e->cells || !e->heads || !e->head_dim || e->cells > UINT32_MAX))
        why = "an empty or oversized dimension";
    if (why) {
        snprintf(err, errlen, "array %s: %s", e->name, why);
        return -1;
    }
    if (e->head_major && h->ndim == 4 && e->heads == 1) e->head_major = 0; /* one head: the same bytes */
    e->role = role;
    e->layer = layer;
    e->width = e->heads * e->head_dim;
    return 0;
}

/* [heads, cells, head_dim] <-> [cells, heads, head_dim] for one tensor. */
static int permute(uint8_t *p, uint64_t cells, uint64_t heads, uint64_t hd, uint64_t es, int to_cell_major)
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
static uint64_t n_tensors_of(const np_entry *e) { return e->role == ROLE_STACK ? 2 * e->h.shape[0] : 1; }
static uint64_t tensor_bytes(const np_entry *e) { return e->cells * e->width * e->h.itemsize; }

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
static tq_status member_done(tq_ctx *ctx, buf *b, uint64_t name_off, uint64_t off, const char *label)
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
        return tq_fail(ctx, TQ_ERR_FORMAT, "%s: array %s: %s", label, name, err);
    e.data_off = off + e.h.header_len;
    e.data_len = b->len - e.data_off;
    if (classify(&e, err, sizeof err)) return tq_fail(ctx, TQ_ERR_FORMAT, "%s: %s", label, err);
    if ((e.role == ROLE_K || e.role == ROLE_V || e.role == ROLE_STACK) && e.head_major)
        for (uint64_t t = 0; t < n_tensors_of(&e); t++)
            if (permute(b->p + e.data_off + t * tensor_bytes(&e), e.cells, e.heads, e.head_dim, e.h.itemsize, 1))
                return tq_fail(ctx, TQ_ERR_NOMEM, "out of memory");
    return TQ_OK;
}

static tq_status begin_member(tq_ctx *ctx, buf *b, const char *name, uint64_t *name_off, uint64_t *len_off)
{
    size_t nl = strlen(name);
    if (!nl || nl > MAX_NAME) return tq_fail(ctx, TQ_ERR_FORMAT, "an array name of %zu bytes", nl);
    uint32_t n32 = (uint32_t)nl;
    uint64_t zero = 0;
    *name_off = b->len;
    if (put(b, &n32, 4) || put(b, name, nl)) return tq_fail(ctx, TQ_ERR_NOMEM, "out of memory");
    *len_off = b->len;
    if (put(b, &zero, 8)) return tq_fail(ctx, TQ_ERR_NOMEM, "out of memory");
    return TQ_OK;
}

static void end_member(buf *b, uint64_t len_off)
{
    uint64_t n = b->len - len_off - 8;
    memcpy(b->p + len_off, &n, 8);
}

static tq_status from_npz(tq_ctx *ctx, const uint8_t *p, uint64_t size, const char *label, buf *b, uint32_t *count)
{
    struct archive *a = archive_read_new();
    if (!a) return tq_fail(ctx, TQ_ERR_NOMEM, "out of memory");
    archive_read_support_format_zip_seekable(a);
    tq_status st = TQ_OK;
    if (archive_read_open_memory(a, p, size) != ARCHIVE_OK) {
        st = tq_fail(ctx, TQ_ERR_FORMAT, "%s: not a readable .npz (%s)", label, archive_error_string(a));
        archive_read_free(a);
        return st;
    }
    struct archive_entry *ae;
    int r;
    while (!st && (r = archive_read_next_header(a, &ae)) == ARCHIVE_OK) {
        if (archive_entry_filetype(ae) == AE_IFDIR) continue;
        const char *name = archive_entry_pathname(ae);
        if (!name) {
            st = tq_fail(ctx, TQ_ERR_FORMAT, "%s: a .npz member without a name", label);
            break;
        }
        if (++*count > MAX_ENTRIES) {
            st = tq_fail(ctx, TQ_ERR_FORMAT, "%s: more than %d arrays", label, MAX_ENTRIES);
            break;
        }
        uint64_t name_off, len_off;
        if ((st = begin_member(ctx, b, name, &name_off, &len_off))) break;
        uint64_t start = b->len;
        for (;;) {
            if (reserve(b, 1 << 20)) {
                st = tq_fail(ctx, TQ_ERR_NOMEM, "out of memory");
                break;
            }
            uint64_t room = b->cap - b->len;
            if (b->limit && room > b->limit - b->len + 1) room = b->limit - b->len + 1;
            la_ssize_t n = archive_read_data(a, b->p + b->len, (size_t)room);
            if (n < 0) {
                st = tq_fail(ctx, TQ_ERR_FORMAT, "%s: array %s: %s", label, name, archive_error_string(a));
                break;
            }
            if (!n) break;
            b->len += (uint64_t)n;
            if (b->limit && b->len > b->limit) {
                st = tq_fail(ctx, TQ_ERR_UNSUPPORTED, "%s: arrays larger than the %" PRIu64 "-byte limit", label, b->limit);
                break;
            }
        }
        if (!st) {
            end_member(b, len_off);
            if (b->len == start) st = tq_fail(ctx, TQ_ERR_FORMAT, "%s: array %s is empty", label, name);
        }
        if (!st) st = member_done(ctx, b, name_off, start, label);
    }
    if (!st && r != ARCHIVE_EOF)
        st = tq_fail(ctx, TQ_ERR_FORMAT, "%s: not a readable .npz (%s)", label, archive_error_string(a));
    archive_read_free(a);
    return st;
}

tq_status tq_numpy_build_image(tq_ctx *ctx, const uint8_t *p, uint64_t size, const char *label, uint64_t max_bytes,
                               uint8_t **img, uint64_t *img_size)
{
    *img = NULL;
    buf b = {NULL, 0, 0, 0};
    uint32_t count = 0, version = 1, zero = 0;
    tq_status st = TQ_OK;
    if (put(&b, "TQNI", 4) || put(&b, &version, 4) || put(&b, &zero, 4) || put(&b, &zero, 4)) {
        free(b.p);
        return tq_fail(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    if (max_bytes) b.limit = max_bytes + b.len;
    if (!memcmp(p, "\x93NUMPY", 6)) { /* one array: a stack of all layers */
        uint64_t name_off, len_off;
        count = 1;
        if (max_bytes && size > max_bytes) st = tq_fail(ctx, TQ_ERR_UNSUPPORTED, "%s: larger than the limit", label);
        if (!st) st = begin_member(ctx, &b, "kv.npy", &name_off, &len_off);
        uint64_t start = b.len;
        if (!st && put(&b, p, size)) st = tq_fail(ctx, TQ_ERR_NOMEM, "out of memory");
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

static tq_status bad(tq_ctx *ctx, const tq_llama_state *s, const char *what)
{
    return tq_fail(ctx, TQ_ERR_FORMAT, "%s: %s", s->label, what);
}

tq_status tq_numpy_image_parse(tq_ctx *ctx, tq_llama_state *s)
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
    if (n > MAX_ENTRIES || n > (size - pos) / 12) return bad(ctx, s, "NumPy image with an implausible array count");
    tq_numpy_info *info = calloc(1, sizeof *info);
    if (!info || !(info->e = calloc(n ? n : 1, sizeof *info->e))) {
        free(info);
        return tq_fail(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    s->numpy = info;
    s->kind = TQ_STATE_NUMPY;
    s->version = 1;
    if (!(s->arch = strdup(""))) return tq_fail(ctx, TQ_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < n; i++) {
        np_entry *e = &info->e[info->n];
        uint32_t nl;
        uint64_t ml;
        if (size - pos < 4) return bad(ctx, s, "truncated NumPy image");
        memcpy(&nl, p + pos, 4);
        pos += 4;
        if (!nl || nl > MAX_NAME || nl > size - pos || memchr(p + pos, 0, nl)) return bad(ctx, s, "bad array name in the NumPy image");
        if (!(e->name = malloc(nl + 1))) return tq_fail(ctx, TQ_ERR_NOMEM, "out of memory");
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
            if (!strcmp(info->e[j].name, e->name)) return bad(ctx, s, "two arrays with the same name");
        pos += ml;
    }
    if (pos != size) return bad(ctx, s, "bytes after the last array of the NumPy image");

    /* the layers: per-layer K/V arrays or one stack, never both */
    uint32_t n_layer = 0, stacks = 0, per_layer = 0;
    uint64_t cells = 0;
    const np_entry *tokens = NULL;
    for (uint32_t i = 0; i < n; i++) {
        const np_entry *e = &info->e[i];
        if (e->role == ROLE_TOKENS && !tokens) tokens = e;
        if (e->role == ROLE_OTHER || e->role == ROLE_TOKENS) continue;
        if (cells && e->cells != cells) return bad(ctx, s, "K/V arrays with different token counts");
        cells = e->cells;
        if (e->role == ROLE_STACK) stacks++, n_layer = (uint32_t)e->h.shape[0];
        else per_layer++, n_layer = e->layer + 1 > n_layer ? e->layer + 1 : n_layer;
    }
    if (!stacks && !per_layer)
        return bad(ctx, s, "no K/V arrays (expected k_0, v_0, ... or one [layers, 2, tokens, heads, head_dim] array; "
                           "see tq-encode-kvdump(1))");
    if (stacks > 1 || (stacks && per_layer)) return bad(ctx, s, "K/V given both as a stacked array and per layer");
    if (per_layer && per_layer != 2 * n_layer) return bad(ctx, s, "K/V arrays missing or repeated for some layers");
    tq_kv_stream *st = calloc(1, sizeof *st);
    if (!st) return tq_fail(ctx, TQ_ERR_NOMEM, "out of memory");
    s->n_kv = 1;
    s->kv[0].n_stream = 1;
    s->kv[0].streams = st;
    st->cell_count = (uint32_t)cells;
    st->n_layer = n_layer;
    st->k = calloc(n_layer, sizeof *st->k);
    st->v = calloc(n_layer, sizeof *st->v);
    if (!st->k || !st->v) return tq_fail(ctx, TQ_ERR_NOMEM, "out of memory");
    info->n_layer = n_layer;
    s->prefix_len = UINT64_MAX;
    for (uint32_t i = 0; i < n; i++) {
        const np_entry *e = &info->e[i];
        if (e->role == ROLE_OTHER || e->role == ROLE_TOKENS) continue;
        for (uint64_t t = 0; t < n_tensors_of(e); t++) {
            int is_v = e->role == ROLE_STACK ? (int)(t & 1) : e->role == ROLE_V;
            uint32_t l = e->role == ROLE_STACK ? (uint32_t)(t / 2) : e->layer;
            tq_kv_tensor *kt = is_v ? &st->v[l] : &st->k[l];
            if (kt->type) return bad(ctx, s, "K/V arrays repeated for a layer");
            kt->type = tq_ggml_type_get(s->profile, e->h.itemsize == 4 ? 0 : 1);
            kt->width = e->width;
            kt->row_size = e->width * e->h.itemsize;
            kt->bytes = tensor_bytes(e);
            kt->data_off = e->data_off + t * kt->bytes;
            kt->data = p + kt->data_off;
            if (kt->data_off < s->prefix_len) s->prefix_len = kt->data_off;
        }
    }
    if (tokens) {
        uint64_t nt = tokens->h.count;
        if (!(s->tokens = malloc(4 * nt + 4))) return tq_fail(ctx, TQ_ERR_NOMEM, "out of memory");
        for (uint64_t i = 0; i < nt; i++) {
            int64_t v;
            if (tokens->h.itemsize == 4) {
                int32_t v32;
                memcpy(&v32, p + tokens->data_off + 4 * i, 4);
                v = v32;
            } else {
                memcpy(&v, p + tokens->data_off + 8 * i, 8);
            }
            if (v < INT32_MIN || v > INT32_MAX) return bad(ctx, s, "a token id out of the int32 range");
            s->tokens[i] = (int32_t)v;
        }
        s->n_tokens = (uint32_t)nt;
    } else if (!(s->tokens = malloc(4))) {
        return tq_fail(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    return TQ_OK;
}

/* ------------------------------------------------------------ .npz out */

typedef struct zip_out {
    struct archive *a;
    FILE *f;
    int io_error;
} zip_out;

static la_ssize_t zip_write(struct archive *a, void *user, const void *p, size_t n)
{
    zip_out *z = user;
    if (fwrite(p, 1, n, z->f) != n) {
        z->io_error = 1;
        archive_set_error(a, 5, "write error");
        return -1;
    }
    return (la_ssize_t)n;
}

static tq_status zip_fail(tq_ctx *ctx, zip_out *z)
{
    return tq_fail(ctx, TQ_ERR_IO, "writing the .npz failed%s%s", z->io_error ? "" : ": ",
                   z->io_error ? "" : archive_error_string(z->a));
}

static tq_status zip_member(tq_ctx *ctx, zip_out *z, const char *name, uint64_t size)
{
    struct archive_entry *e = archive_entry_new();
    if (!e) return tq_fail(ctx, TQ_ERR_NOMEM, "out of memory");
    char full[MAX_NAME + 8];
    size_t nl = strlen(name);
    snprintf(full, sizeof full, "%s%s", name, nl >= 4 && !strcmp(name + nl - 4, ".npy") ? "" : ".npy");
    archive_entry_set_pathname(e, full);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, (la_int64_t)size);
    int r = archive_write_header(z->a, e);
    archive_entry_free(e);
    return r == ARCHIVE_OK ? TQ_OK : zip_fail(ctx, z);
}

static tq_status zip_data(tq_ctx *ctx, zip_out *z, const void *p, uint64_t n)
{
    const uint8_t *b = p;
    while (n) {
        size_t piece = n > (1u << 30) ? 1u << 30 : (size_t)n;
        la_ssize_t w = archive_write_data(z->a, b, piece);
        if (w <= 0) return zip_fail(ctx, z);
        b += w;
        n -= (uint64_t)w;
    }
    return TQ_OK;
}

/* A member from a header and one buffer. */
static tq_status zip_array(tq_ctx *ctx, zip_out *z, const char *name, const char *hdr, uint32_t hlen, const void *data,
                           uint64_t n)
{
    tq_status st = zip_member(ctx, z, name, hlen + n);
    if (!st) st = zip_data(ctx, z, hdr, hlen);
    if (!st) st = zip_data(ctx, z, data, n);
    return st;
}

static int in_range(const tq_npz_options *o, uint32_t l) { return l >= o->layer_lo && l <= o->layer_hi; }

/* The first `cells` rows of a cell-major tensor, head-major again if the
 * array was. */
static tq_status put_tensor(tq_ctx *ctx, zip_out *z, const np_entry *e, const uint8_t *data, uint64_t cells)
{
    uint64_t n = cells * e->width * e->h.itemsize;
    if (!e->head_major) return zip_data(ctx, z, data, n);
    uint8_t *tmp = malloc(n ? n : 1);
    if (!tmp) return tq_fail(ctx, TQ_ERR_NOMEM, "out of memory");
    memcpy(tmp, data, n);
    tq_status st = permute(tmp, cells, e->heads, e->head_dim, e->h.itemsize, 0) ? tq_fail(ctx, TQ_ERR_NOMEM, "out of memory")
                                                                               : zip_data(ctx, z, tmp, n);
    free(tmp);
    return st;
}

static tq_status npz_from_numpy(tq_ctx *ctx, const tq_llama_state *s, const tq_npz_options *o, zip_out *z)
{
    const tq_numpy_info *info = s->numpy;
    tq_status st = TQ_OK;
    for (uint32_t i = 0; i < info->n && !st; i++) {
        const np_entry *e = &info->e[i];
        const uint8_t *member = s->map + e->member_off, *data = s->map + e->data_off;
        uint64_t shape[TQ_NPY_MAX_DIMS];
        memcpy(shape, e->h.shape, sizeof shape);
        char hdr[512];
        if (e->role == ROLE_OTHER) {
            st = zip_array(ctx, z, e->name, (const char *)member, e->h.header_len, data, e->data_len);
        } else if (e->role == ROLE_TOKENS) {
            uint64_t nt = e->h.count;
            if (o->max_tokens && o->max_tokens < nt) nt = shape[e->h.ndim - 1] = o->max_tokens;
            uint32_t hl = tq_npy_format(hdr, e->h.descr, e->h.ndim, shape);
            st = zip_array(ctx, z, e->name, hdr, hl, data, nt * e->h.itemsize);
        } else {
            uint64_t cells = o->max_tokens && o->max_tokens < e->cells ? o->max_tokens : e->cells;
            int cell_axis = e->role == ROLE_STACK ? (e->head_major ? 4 : 2) : e->h.ndim == 4 ? 2 : 0;
            shape[cell_axis] = cells;
            uint64_t lo = 0, nl = 1;
            if (e->role == ROLE_STACK) {
                lo = o->layer_lo < shape[0] ? o->layer_lo : shape[0];
                uint64_t hi = o->layer_hi < shape[0] ? o->layer_hi + 1ull : shape[0];
                nl = shape[0] = hi > lo ? hi - lo : 0;
            } else if (!in_range(o, e->layer)) {
                continue;
            }
            uint32_t hl = tq_npy_format(hdr, e->h.descr, e->h.ndim, shape);
            uint64_t tb = cells * e->width * e->h.itemsize;
            st = zip_member(ctx, z, e->name, hl + (e->role == ROLE_STACK ? 2 * nl : 1) * tb);
            if (!st) st = zip_data(ctx, z, hdr, hl);
            for (uint64_t t = 2 * lo; !st && t < (e->role == ROLE_STACK ? 2 * (lo + nl) : 1); t++)
                st = put_tensor(ctx, z, e, data + t * tensor_bytes(e), cells);
        }
    }
    return st;
}

static tq_status npz_from_state(tq_ctx *ctx, const tq_llama_state *s, const tq_npz_options *o, zip_out *z)
{
    char hdr[512], name[64];
    uint64_t nt = tq_llama_state_n_tokens(s);
    if (o->max_tokens && o->max_tokens < nt) nt = o->max_tokens;
    uint32_t hl = tq_npy_format(hdr, "<i4", 1, &nt);
    tq_status st = zip_array(ctx, z, "tokens", hdr, hl, tq_llama_state_tokens(s), 4 * nt);
    float *rows = NULL;
    uint16_t *half = NULL;
    const uint32_t step = 1024;
    for (uint32_t i = 0; i < tq_llama_state_n_kv(s) && !st; i++) {
        const tq_kv_state *kv = tq_llama_state_kv(s, i);
        for (uint32_t j = 0; j < kv->n_stream && !st; j++) {
            const tq_kv_stream *sr = &kv->streams[j];
            uint32_t cells;
            if (!sr->cell_count || (st = tq_kv_stream_prefix(ctx, s, sr, o->max_tokens, &cells, NULL))) continue;
            for (uint32_t l = 0; l < sr->n_layer && !st; l++)
                for (int v = 0; v < 2 && !st; v++) {
                    if (!in_range(o, l)) continue;
                    const tq_kv_tensor *t = v ? &sr->v[l] : &sr->k[l];
                    int f16 = t->type->dtype == TQ_DT_F16;
                    uint64_t es = f16 ? 2 : 4, shape[3] = {cells, t->width, 0};
                    int nd = 2;
                    if (o->head_dim && t->width % o->head_dim == 0)
                        shape[1] = t->width / o->head_dim, shape[2] = o->head_dim, nd = 3;
                    if (tq_llama_state_n_kv(s) == 1 && kv->n_stream == 1) snprintf(name, sizeof name, "%s_%u", v ? "v" : "k", l);
                    else snprintf(name, sizeof name, "kv%u_s%u_%s_%u", i, j, v ? "v" : "k", l);
                    hl = tq_npy_format(hdr, f16 ? "<f2" : "<f4", nd, shape);
                    st = zip_member(ctx, z, name, hl + (uint64_t)cells * t->width * es);
                    if (!st) st = zip_data(ctx, z, hdr, hl);
                    if (!st && !rows) {
                        uint64_t w = 0; /* the widest row of the file */
                        for (uint32_t a = 0; a < tq_llama_state_n_kv(s); a++)
                            for (uint32_t b = 0; b < tq_llama_state_kv(s, a)->n_stream; b++) {
                                const tq_kv_stream *q = &tq_llama_state_kv(s, a)->streams[b];
                                for (uint32_t c = 0; c < q->n_layer; c++) {
                                    if (q->k && q->k[c].width > w) w = q->k[c].width;
                                    if (q->v && q->v[c].width > w) w = q->v[c].width;
                                }
                            }
                        rows = malloc(step * w * sizeof(float));
                        half = malloc(step * w * sizeof(uint16_t));
                        if (!rows || !half) st = tq_fail(ctx, TQ_ERR_NOMEM, "out of memory");
                    }
                    for (uint32_t c0 = 0; c0 < cells && !st; c0 += step) {
                        uint32_t nr = cells - c0 < step ? cells - c0 : step;
                        size_t nv = (size_t)nr * t->width;
                        if (f16 && !t->transposed) {
                            st = zip_data(ctx, z, t->data + (uint64_t)c0 * t->row_size, nv * 2);
                            continue;
                        }
                        st = tq_kv_tensor_read_rows(ctx, t, sr->cell_count, c0, nr, rows);
                        if (!st && f16) st = tq_quantize(ctx, TQ_DT_F16, rows, nv, half);
                        if (!st) st = zip_data(ctx, z, f16 ? (void *)half : (void *)rows, nv * es);
                    }
                }
        }
    }
    free(rows);
    free(half);
    return st;
}

tq_status tq_state_write_npz(tq_ctx *ctx, const tq_llama_state *s, const tq_npz_options *opt, FILE *out)
{
    tq_npz_options all = {0, 0, UINT32_MAX, 0};
    const tq_npz_options *o = opt ? opt : &all;
    zip_out z = {archive_write_new(), out, 0};
    if (!z.a) return tq_fail(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st = TQ_OK;
    /* stored, not deflated: K/V data barely compresses and np.load can then
     * map the members */
    if (archive_write_set_format_zip(z.a) != ARCHIVE_OK || archive_write_zip_set_compression_store(z.a) != ARCHIVE_OK ||
        archive_write_set_bytes_in_last_block(z.a, 1) != ARCHIVE_OK ||
        archive_write_open(z.a, &z, NULL, zip_write, NULL) != ARCHIVE_OK)
        st = zip_fail(ctx, &z);
    if (!st) st = tq_llama_state_kind(s) == TQ_STATE_NUMPY ? npz_from_numpy(ctx, s, o, &z) : npz_from_state(ctx, s, o, &z);
    if (archive_write_close(z.a) != ARCHIVE_OK && !st) st = zip_fail(ctx, &z);
    archive_write_free(z.a);
    return st;
}

/* ------------------------------------------------------------ InnerQ scales */

tq_status tq_innerq_scales_load(tq_ctx *ctx, const char *path, float **out, uint32_t *layers, uint32_t *dim)
{
    *out = NULL;
    const uint8_t *p;
    uint64_t size;
    tq_status st = tq_map_file(ctx, path, 10, "not a .npy array", &p, &size);
    if (st) return st;
    tq_npy_header h;
    char err[256];
    if (tq_npy_parse(p, size, &h, err, sizeof err)) {
        tq_unmap_file(p, size);
        return tq_fail(ctx, TQ_ERR_FORMAT, "%s: %s", path, err);
    }
    const char *why = NULL;
    uint64_t d = h.ndim ? h.shape[h.ndim - 1] : 0, l = h.ndim == 3 ? h.shape[0] : 1;
    if (!is_float(&h) || h.fortran_order) why = "not a C-order float32 or float16 array";
    else if (!(h.ndim == 1 || (h.ndim == 2 && h.shape[0] == 2) || (h.ndim == 3 && h.shape[1] == 2)))
        why = "not shaped [head_dim], [2, head_dim] (K, V) or [layers, 2, head_dim]";
    else if (!d || d > 512 || !l || l > 65536) why = "an implausible size";
    else if (h.count * h.itemsize != size - h.header_len) why = "data size does not match its shape";
    if (why) {
        tq_unmap_file(p, size);
        return tq_fail(ctx, TQ_ERR_FORMAT, "%s: InnerQ scales: %s", path, why);
    }
    float *s = malloc(l * 2 * d * sizeof(float));
    if (!s) {
        tq_unmap_file(p, size);
        return tq_fail(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    float *raw = malloc(h.count * sizeof(float));
    if (!raw || tq_dequantize(ctx, h.itemsize == 4 ? TQ_DT_F32 : TQ_DT_F16, p + h.header_len, h.count, raw)) {
        free(s), free(raw);
        tq_unmap_file(p, size);
        return tq_fail(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    tq_unmap_file(p, size);
    for (uint64_t i = 0; i < l * 2 * d; i++) { /* [D] serves K and V alike */
        s[i] = raw[h.ndim == 1 ? i % d : i];
        if (!(s[i] > 0.0f) || isinf(s[i])) {
            double bad = s[i];
            free(s), free(raw);
            return tq_fail(ctx, TQ_ERR_FORMAT, "%s: InnerQ scale %llu is %g, not finite and positive", path,
                           (unsigned long long)i, bad);
        }
    }
    free(raw);
    *out = s;
    *layers = (uint32_t)l;
    *dim = (uint32_t)d;
    return TQ_OK;
}
