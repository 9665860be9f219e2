/* io.c - see io.h: standard input and output, and objects through s3.h. */
#define _GNU_SOURCE /* fopencookie */
#include "io.h"

#include "file_io.h"
#include "s3.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int tq_io_is_object(const char *name) { return tq_s3_is_url(name); }
int tq_io_is_stream(const char *name) { return !strcmp(name, "-") || tq_s3_is_url(name); }

struct tq_src {
    char *name;
    tq_s3 *obj;           /* NULL: standard input, or memory */
    tq_s3_stream *stream; /* the object's bytes being streamed */
    const uint8_t *mem;   /* tq_src_open_memory's bytes */
    uint64_t mem_size;
    int mem_ranged;
    int sequential;           /* an object read as a pipe: one streamed GET from byte 0 */
    uint64_t mem_at, mem_end; /* memory: the next byte in order, the end of the range */
    uint64_t size;            /* an object's, once known (UINT64_MAX before) */
    uint8_t peeked[64];       /* standard input: bytes peeked and not yet read */
    uint64_t n_peeked, peek_at;
    uint64_t received;
};

tq_status tq_src_open(tq_ctx *ctx, const char *name, tq_src **out)
{
    tq_src *s = calloc(1, sizeof *s);
    *out = NULL;
    if (!s || !(s->name = strdup(strcmp(name, "-") ? name : "stdin"))) {
        free(s);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    s->size = UINT64_MAX;
    if (tq_s3_is_url(name)) {
        tq_status st = tq_s3_open(ctx, name, &s->obj);
        if (st) {
            tq_src_close(s);
            return st;
        }
    }
    *out = s;
    return TQ_OK;
}

tq_status tq_src_open_memory(tq_ctx *ctx, const void *data, uint64_t size, const char *label,
                             int ranged, tq_src **out)
{
    tq_src *s = calloc(1, sizeof *s);
    *out = NULL;
    if (!s || !(s->name = strdup(label))) {
        free(s);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    s->mem = data ? data : (const uint8_t *)"";
    s->mem_size = s->size = s->mem_end = size;
    s->mem_ranged = ranged;
    *out = s;
    return TQ_OK;
}

void tq_src_close(tq_src *s)
{
    if (!s) return;
    tq_s3_stream_close(s->stream);
    tq_s3_close(s->obj);
    free(s->name);
    free(s);
}

const char *tq_src_name(const tq_src *s) { return s->name; }
int tq_src_ranged(const tq_src *s) { return (s->obj != NULL || s->mem_ranged) && !s->sequential; }

void tq_src_sequential(tq_src *s) { s->sequential = 1; }

uint64_t tq_src_received(const tq_src *s) { return s->obj ? tq_s3_bytes_in(s->obj) : s->received; }

static tq_status not_ranged(tq_ctx *ctx, const tq_src *s)
{
    return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED, "%s: a pipe", s->name);
}

/* Memory: bytes [at, end) of it, at most n. */
static uint64_t mem_take(tq_src *s, uint8_t *b, uint64_t n)
{
    uint64_t k = s->mem_end - s->mem_at < n ? s->mem_end - s->mem_at : n;
    memcpy(b, s->mem + s->mem_at, k);
    s->mem_at += k;
    s->received += k;
    return k;
}

tq_status tq_src_size(tq_ctx *ctx, tq_src *s, uint64_t *size)
{
    if (!tq_src_ranged(s)) return not_ranged(ctx, s);
    if (s->size == UINT64_MAX) {
        tq_status st = tq_s3_size(ctx, s->obj, &s->size);
        if (st) return st;
    }
    *size = s->size;
    return TQ_OK;
}

tq_status tq_src_read_at(tq_ctx *ctx, tq_src *s, uint64_t off, void *buf, uint64_t n)
{
    uint64_t size;
    if (!tq_src_ranged(s)) return not_ranged(ctx, s);
    if (!n) return TQ_OK;
    if (s->mem) {
        if (off > s->mem_size || n > s->mem_size - off)
            return tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: a range past the end", s->name);
        memcpy(buf, s->mem + off, n);
        s->received += n;
        return TQ_OK;
    }
    uint64_t got;
    tq_status st = tq_s3_get(ctx, s->obj, off, n, buf, &got, &size);
    if (!st) s->size = size;
    if (!st && got != n)
        st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: a range past the end", s->name);
    return st;
}

tq_status tq_src_read_head(tq_ctx *ctx, tq_src *s, void *buf, uint64_t n, uint64_t *got)
{
    if (!s->obj && !s->mem) return not_ranged(ctx, s);
    if (s->mem) {
        *got = n < s->mem_size ? n : s->mem_size;
        memcpy(buf, s->mem, *got);
        return TQ_OK;
    }
    uint64_t size;
    tq_status st = n ? tq_s3_get(ctx, s->obj, 0, n, buf, got, &size) : tq_src_size(ctx, s, &size);
    if (!n) *got = 0;
    if (!st) s->size = size;
    return st;
}

tq_status tq_src_stream(tq_ctx *ctx, tq_src *s, uint64_t off, uint64_t n)
{
    if (!tq_src_ranged(s)) return not_ranged(ctx, s);
    if (s->mem) {
        if (off > s->mem_size || n > s->mem_size - off)
            return tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: a range past the end", s->name);
        s->mem_at = off;
        s->mem_end = off + n;
        return TQ_OK;
    }
    tq_s3_stream_close(s->stream);
    s->stream = NULL;
    return tq_s3_stream_open(ctx, s->obj, off, n, &s->stream);
}

/* Standard input: peeked bytes first, then read(2) until n or the end. */
static tq_status read_stdin(tq_ctx *ctx, tq_src *s, uint8_t *b, uint64_t n, uint64_t *got)
{
    *got = 0;
    while (n && s->peek_at < s->n_peeked) {
        b[(*got)++] = s->peeked[s->peek_at++];
        n--;
    }
    while (n) {
        ssize_t k = read(STDIN_FILENO, b + *got, n > (1u << 30) ? (1u << 30) : n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0)
            return tq_ctx_set_error(ctx, TQ_ERR_IO, "stdin: reading failed: %s", strerror(errno));
        if (k == 0) break;
        *got += (uint64_t)k;
        s->received += (uint64_t)k;
        n -= (uint64_t)k;
    }
    return TQ_OK;
}

tq_status tq_src_read(tq_ctx *ctx, tq_src *s, void *buf, uint64_t n, uint64_t *got)
{
    uint8_t *b = buf;
    if (s->mem) {
        *got = mem_take(s, b, n);
        return TQ_OK;
    }
    if (!s->obj) return read_stdin(ctx, s, b, n, got);
    if (!s->stream) { /* the whole object, streamed (its size comes with it) */
        tq_status st = tq_s3_stream_open(ctx, s->obj, 0, UINT64_MAX, &s->stream);
        if (st) return st;
    }
    *got = 0;
    while (*got < n) {
        uint64_t k;
        tq_status st = tq_s3_stream_read(ctx, s->stream, b + *got, n - *got, &k);
        if (st) return st;
        if (!k) break;
        *got += k;
    }
    return TQ_OK;
}

tq_status tq_src_peek(tq_ctx *ctx, tq_src *s, void *buf, uint64_t n, uint64_t *got)
{
    if (n > sizeof s->peeked) n = sizeof s->peeked;
    if (s->obj || s->mem) return tq_src_read_head(ctx, s, buf, n, got);
    if (!s->n_peeked) {
        tq_status st = read_stdin(ctx, s, s->peeked, n, &s->n_peeked);
        s->peek_at = 0;
        if (st) return st;
    }
    *got = n < s->n_peeked ? n : s->n_peeked;
    memcpy(buf, s->peeked, *got);
    return TQ_OK;
}

tq_status tq_io_peek(tq_ctx *ctx, const char *name, tq_src **src, void *buf, uint64_t n,
                     uint64_t *got)
{
    *src = NULL;
    *got = 0;
    if (!tq_io_is_stream(name)) {
        FILE *f = fopen(name, "rb");
        if (f) {
            *got = fread(buf, 1, n, f);
            fclose(f);
        }
        return TQ_OK;
    }
    tq_status st = tq_src_open(ctx, name, src);
    if (!st) st = tq_src_peek(ctx, *src, buf, n, got);
    if (st) {
        tq_src_close(*src);
        *src = NULL;
    }
    return st;
}

tq_status tq_src_spool(tq_ctx *ctx, tq_src *s, tq_src_known known, char **path)
{
    char near[4096];
    FILE *f;
    enum { BUF = 4 << 20 };
    uint8_t head[16];
    uint64_t n_head = 0;
    *path = NULL;
    /* the magic first: bytes of no kind tq reads are refused before they are copied */
    if (known && tq_src_peek(ctx, s, head, sizeof head, &n_head)) return TQ_ERR_IO;
    if (known && !known(head, (size_t)n_head))
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: not a file this reads (its first bytes "
                                                    "are no magic it knows)", s->name);
    uint8_t *buf = malloc(BUF);
    snprintf(near, sizeof near, "%s/tq-input", tq_temp_dir());
    tq_status st = buf ? tq_temp_create_ex(ctx, near, 0, path, &f) : TQ_ERR_NOMEM;
    if (!buf) tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    if (!st) tq_temp_unname(path); /* a copy no SIGKILL leaves in TMPDIR */
    for (uint64_t got = BUF; !st && got == BUF;) {
        st = tq_src_read(ctx, s, buf, BUF, &got);
        if (!st && got && fwrite(buf, 1, got, f) != got)
            st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: writing a copy of %s failed: %s", *path,
                                  s->name, strerror(errno));
    }
    free(buf);
    if (*path && fflush(f) && !st)
        st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: writing a copy of %s failed: %s", *path, s->name,
                              strerror(errno));
    if (*path) fclose(f);
    if (st && *path) {
        tq_temp_discard(*path);
        *path = NULL;
    }
    return st;
}

tq_status tq_io_local(tq_ctx *ctx, const char *name, tq_src_known known, char **tmp,
                      const char **path)
{
    tq_src *s;
    *tmp = NULL;
    *path = name;
    if (!tq_io_is_stream(name)) return TQ_OK;
    tq_status st = tq_src_open(ctx, name, &s);
    if (!st) st = tq_src_spool(ctx, s, known, tmp);
    tq_src_close(s);
    if (!st) *path = *tmp;
    return st;
}

/* ------------------------------------------------------------ sinks */

struct tq_sink {
    tq_s3 *obj;
    tq_s3_upload *up;
    tq_ctx *ctx; /* the uploads' messages, as the stdio stream cannot carry them */
    FILE *f;
    int failed;
};

static ssize_t sink_write(void *cookie, const char *p, size_t n)
{
    tq_sink *s = cookie;
    if (s->failed || tq_s3_upload_write(s->ctx, s->up, p, n)) {
        s->failed = 1;
        errno = EIO;
        return -1;
    }
    return (ssize_t)n;
}

static int sink_close(void *cookie)
{
    (void)cookie; /* committed or aborted by the sink's own calls */
    return 0;
}

tq_status tq_sink_open(tq_ctx *ctx, const char *name, tq_sink **out, FILE **f)
{
    static const cookie_io_functions_t io = {.write = sink_write, .close = sink_close};
    tq_sink *s = calloc(1, sizeof *s);
    *out = NULL;
    *f = NULL;
    if (!s || !(s->ctx = tq_ctx_new())) {
        free(s);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    tq_status st = tq_s3_open(ctx, name, &s->obj);
    if (!st) st = tq_s3_upload_begin(ctx, s->obj, &s->up);
    if (!st && !(s->f = fopencookie(s, "w", io)))
        st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    if (st) {
        tq_sink_abort(s);
        return st;
    }
    /* the parts are 8 MiB: stdio's buffer need only spare the small writes' calls */
    setvbuf(s->f, NULL, _IOFBF, 1 << 20);
    *out = s;
    *f = s->f;
    return TQ_OK;
}

const char *tq_sink_error(const tq_sink *s) { return s->failed ? tq_ctx_error(s->ctx) : ""; }

static void sink_free(tq_sink *s)
{
    tq_s3_close(s->obj);
    tq_ctx_free(s->ctx);
    free(s);
}

tq_status tq_sink_commit(tq_ctx *ctx, tq_sink *s)
{
    tq_status st = TQ_OK;
    if (fflush(s->f)) {
        st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s",
                              s->failed ? tq_ctx_error(s->ctx) : "writing failed");
    }
    fclose(s->f);
    s->f = NULL;
    if (st) {
        tq_s3_upload_abort(s->up);
    } else {
        st = tq_s3_upload_commit(ctx, s->up);
    }
    s->up = NULL;
    sink_free(s);
    return st;
}

void tq_sink_abort(tq_sink *s)
{
    if (!s) return;
    if (s->f) {
        s->failed = 1; /* what stdio still holds goes nowhere */
        fclose(s->f);
    }
    tq_s3_upload_abort(s->up);
    sink_free(s);
}
