/* output.c - see output.h. */
#define _GNU_SOURCE /* fopencookie, sync_file_range */
#include "output.h"

#include "cli.h"
#include "file_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Dirty pages are handed to the disk every 32 MiB while the output is
 * written, so the fsync before the rename finds little left to do and the
 * disk works while the encoder or decoder does. */
#define WRITEBACK_STEP (32u << 20)

typedef struct out_sink {
    int fd;
    uint64_t written, synced;
} out_sink;

static ssize_t sink_write(void *cookie, const char *buf, size_t n)
{
    out_sink *k = cookie;
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(k->fd, buf + done, n - done);
        if (w < 0) {
            if (errno == EINTR) continue;
            return done ? (ssize_t)done : -1;
        }
        done += (size_t)w;
    }
    k->written += n;
    if (k->written - k->synced >= WRITEBACK_STEP) {
        sync_file_range(k->fd, (off_t)k->synced, (off_t)(k->written - k->synced), SYNC_FILE_RANGE_WRITE);
        k->synced = k->written;
    }
    return (ssize_t)n;
}

static int sink_close(void *cookie)
{
    out_sink *k = cookie;
    int rc = close(k->fd);
    free(k);
    return rc;
}

/* Wraps the temporary file's stream in one that starts writeback as it goes. */
static void attach_sink(cli_out *o)
{
    int fd = dup(fileno(o->f));
    out_sink *k = malloc(sizeof *k);
    cookie_io_functions_t io = {NULL, sink_write, NULL, sink_close};
    FILE *f = fd >= 0 && k ? fopencookie(k, "w", io) : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        free(k);
        return; /* keep the plain stream */
    }
    k->fd = fd;
    k->written = k->synced = 0;
    setvbuf(f, NULL, _IOFBF, 1 << 20);
    fclose(o->f);
    o->f = f;
    o->sink = k;
}

int cli_out_open(cli_out *o, const char *path, const char *const *inputs, size_t n)
{
    memset(o, 0, sizeof *o);
    if (!strcmp(path, "-")) {
        o->f = stdout;
        o->is_stdout = 1;
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        if (tq_same_file(path, inputs[i])) return cli_usage_error("%s: the output would overwrite the input %s", path, inputs[i]);
    o->path = strdup(path);
    if (!o->path) return cli_runtime_error("out of memory");
    tq_ctx *ctx = tq_ctx_new();
    if (!ctx || tq_temp_create(ctx, path, &o->tmp, &o->f)) {
        int rc = ctx ? cli_lib_error(ctx) : cli_runtime_error("out of memory");
        tq_ctx_free(ctx);
        free(o->path);
        o->path = NULL;
        return rc;
    }
    tq_ctx_free(ctx);
    attach_sink(o);
    return 0;
}

int cli_out_commit(cli_out *o)
{
    if (o->is_stdout) return fflush(stdout) ? cli_runtime_error("writing to stdout failed: %s", strerror(errno)) : 0;
    int bad = fflush(o->f) || fsync(o->sink ? o->sink->fd : fileno(o->f));
    bad |= fclose(o->f) != 0;
    o->f = NULL;
    if (bad || rename(o->tmp, o->path)) {
        int rc = cli_runtime_error("%s: writing failed: %s", o->path, strerror(errno));
        cli_out_abort(o);
        return rc;
    }
    free(o->tmp), free(o->path);
    o->tmp = o->path = NULL;
    return 0;
}

void cli_out_abort(cli_out *o)
{
    if (o->is_stdout) return;
    if (o->f) fclose(o->f);
    if (o->tmp) unlink(o->tmp);
    free(o->tmp), free(o->path);
    memset(o, 0, sizeof *o);
}
