/* kv_numpy_write.c - any KV view written out as an .npz (NUMPY.md): a
 * NumPy view with its own arrays' names, dtypes, shapes and orientation,
 * other views as tokens, k_L and v_L. */
#include "kv_numpy.h"
#include "kv_numpy_impl.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>

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
        archive_set_error(a, errno, "write error: %s", strerror(errno));
        return -1;
    }
    return (la_ssize_t)n;
}

static tq_status zip_fail(tq_ctx *ctx, zip_out *z)
{
    return tq_ctx_set_error(ctx, TQ_ERR_IO, "writing the .npz failed%s%s", z->io_error ? "" : ": ",
                            z->io_error ? "" : archive_error_string(z->a));
}

static tq_status zip_member(tq_ctx *ctx, zip_out *z, const char *name, uint64_t size)
{
    struct archive_entry *e = archive_entry_new();
    if (!e) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    char full[MAX_NAME + 8];
    size_t nl = strlen(name);
    snprintf(full, sizeof full, "%s%s", name,
             nl >= 4 && !strcmp(name + nl - 4, ".npy") ? "" : ".npy");
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
static tq_status zip_array(tq_ctx *ctx, zip_out *z, const char *name, const char *hdr,
                           uint32_t hlen, const void *data, uint64_t n)
{
    tq_status st = zip_member(ctx, z, name, hlen + n);
    if (!st) st = zip_data(ctx, z, hdr, hlen);
    if (!st) st = zip_data(ctx, z, data, n);
    return st;
}

static int in_range(const tq_npz_options *o, uint32_t l)
{
    return l >= o->layer_lo && l <= o->layer_hi;
}

/* The first `cells` rows of a cell-major tensor, head-major again if the
 * array was. */
static tq_status put_tensor(tq_ctx *ctx, zip_out *z, const np_entry *e, const uint8_t *data,
                            uint64_t cells)
{
    uint64_t n = cells * e->width * e->h.itemsize;
    if (!e->head_major) return zip_data(ctx, z, data, n);
    uint8_t *tmp = malloc(n ? n : 1);
    if (!tmp) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    memcpy(tmp, data, n);
    tq_status st = tq_np_permute(tmp, cells, e->heads, e->head_dim, e->h.itemsize, 0)
                       ? tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory")
                       : zip_data(ctx, z, tmp, n);
    free(tmp);
    return st;
}

static tq_status npz_from_numpy(tq_ctx *ctx, const tq_kv_view *s, const tq_npz_options *o,
                                zip_out *z)
{
    const tq_numpy_info *info = s->source_data;
    tq_status st = TQ_OK;
    for (uint32_t i = 0; i < info->n && !st; i++) {
        const np_entry *e = &info->e[i];
        const uint8_t *member = s->map + e->member_off, *data = s->map + e->data_off;
        uint64_t shape[TQ_NPY_MAX_DIMS];
        memcpy(shape, e->h.shape, sizeof shape);
        char hdr[512];
        if (e->role == ROLE_OTHER) {
            st = zip_array(ctx, z, e->name, (const char *)member, e->h.header_len, data,
                           e->data_len);
        } else if (e->role == ROLE_TOKENS) {
            uint64_t nt = e->h.count;
            if (o->max_tokens && o->max_tokens < nt) nt = shape[e->h.ndim - 1] = o->max_tokens;
            uint32_t hl = tq_npy_format(hdr, e->h.descr, e->h.ndim, shape);
            st = zip_array(ctx, z, e->name, hdr, hl, data, nt * e->h.itemsize);
        } else {
            uint64_t cells = o->max_tokens && o->max_tokens < e->cells ? o->max_tokens : e->cells;
            int cell_axis = 0; /* [cells, ...] */
            if (e->role == ROLE_STACK)
                cell_axis = e->head_major ? 4 : 2;
            else if (e->h.ndim == 4)
                cell_axis = 2; /* [1, heads, cells, head_dim] */
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
                st = put_tensor(ctx, z, e, data + t * tq_np_tensor_bytes(e), cells);
        }
    }
    return st;
}

static tq_status npz_from_state(tq_ctx *ctx, const tq_kv_view *s, const tq_npz_options *o,
                                zip_out *z)
{
    char hdr[512], name[64];
    uint64_t nt = tq_kv_view_n_tokens(s);
    if (o->max_tokens && o->max_tokens < nt) nt = o->max_tokens;
    uint32_t hl = tq_npy_format(hdr, "<i4", 1, &nt);
    tq_status st = zip_array(ctx, z, "tokens", hdr, hl, tq_kv_view_tokens(s), 4 * nt);
    float *rows = NULL;
    uint16_t *half = NULL;
    const uint32_t step = 1024;
    for (uint32_t i = 0; i < tq_kv_view_n_kv(s) && !st; i++) {
        const tq_kv_state *kv = tq_kv_view_kv(s, i);
        for (uint32_t j = 0; j < kv->n_stream && !st; j++) {
            const tq_kv_stream *sr = &kv->streams[j];
            uint32_t cells;
            if (!sr->cell_count ||
                (st = tq_kv_view_stream_prefix(ctx, s, sr, o->max_tokens, &cells, NULL)))
                continue;
            int by_model = tq_kv_view_n_kv(s) == 2 && kv->n_stream == 1 && o->model_layer &&
                           o->model_layer[0] && o->model_layer[1];
            for (uint32_t l = 0; l < sr->n_layer && !st; l++)
                for (int v = 0; v < (sr->v ? 2 : 1) && !st; v++) {
                    uint32_t ml = by_model ? o->model_layer[i][l] : l;
                    if (!in_range(o, ml)) continue;
                    const tq_kv_tensor *t = v ? &sr->v[l] : &sr->k[l];
                    int f16 = t->type->dtype == TQ_DT_F16;
                    uint64_t es = f16 ? 2 : 4, shape[3] = {cells, t->width, 0};
                    int nd = 2;
                    if (o->head_dim && t->width % o->head_dim == 0) {
                        shape[1] = t->width / o->head_dim;
                        shape[2] = o->head_dim;
                        nd = 3;
                    }
                    if ((tq_kv_view_n_kv(s) == 1 && kv->n_stream == 1) || by_model)
                        snprintf(name, sizeof name, "%s_%u", v ? "v" : "k", ml);
                    else
                        snprintf(name, sizeof name, "kv%u_s%u_%s_%u", i, j, v ? "v" : "k", l);
                    hl = tq_npy_format(hdr, f16 ? "<f2" : "<f4", nd, shape);
                    st = zip_member(ctx, z, name, hl + (uint64_t)cells * t->width * es);
                    if (!st) st = zip_data(ctx, z, hdr, hl);
                    if (!st && !rows) {
                        uint64_t w = 0; /* the widest row of the file */
                        for (uint32_t a = 0; a < tq_kv_view_n_kv(s); a++)
                            for (uint32_t b = 0; b < tq_kv_view_kv(s, a)->n_stream; b++) {
                                const tq_kv_stream *q = &tq_kv_view_kv(s, a)->streams[b];
                                for (uint32_t c = 0; c < q->n_layer; c++) {
                                    if (q->k && q->k[c].width > w) w = q->k[c].width;
                                    if (q->v && q->v[c].width > w) w = q->v[c].width;
                                }
                            }
                        rows = malloc(step * w * sizeof(float));
                        half = malloc(step * w * sizeof(uint16_t));
                        if (!rows || !half)
                            st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
                    }
                    for (uint32_t c0 = 0; c0 < cells && !st; c0 += step) {
                        uint32_t nr = cells - c0 < step ? cells - c0 : step;
                        size_t nv = (size_t)nr * t->width;
                        if (f16 && !t->transposed) {
                            st = zip_data(ctx, z, t->data + (uint64_t)c0 * t->row_size, nv * 2);
                            continue;
                        }
                        st = tq_kv_view_read_rows(ctx, t, sr->cell_count, c0, nr, rows);
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

tq_status tq_npz_write(tq_ctx *ctx, const tq_kv_view *s, const tq_npz_options *opt, FILE *out)
{
    tq_npz_options all = {0, 0, UINT32_MAX, 0, NULL};
    const tq_npz_options *o = opt ? opt : &all;
    zip_out z = {archive_write_new(), out, 0};
    if (!z.a) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_status st = TQ_OK;
    /* stored, not deflated: K/V data barely compresses and np.load can then
     * map the members */
    if (archive_write_set_format_zip(z.a) != ARCHIVE_OK ||
        archive_write_zip_set_compression_store(z.a) != ARCHIVE_OK ||
        archive_write_set_bytes_in_last_block(z.a, 1) != ARCHIVE_OK ||
        archive_write_open(z.a, &z, NULL, zip_write, NULL) != ARCHIVE_OK)
        st = zip_fail(ctx, &z);
    if (!st)
        st = s->source == &tq_kv_source_numpy ? npz_from_numpy(ctx, s, o, &z)
                                              : npz_from_state(ctx, s, o, &z);
    if (archive_write_close(z.a) != ARCHIVE_OK && !st) st = zip_fail(ctx, &z);
    archive_write_free(z.a);
    return st;
}
