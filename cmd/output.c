/* output.c - see output.h. */
#define _GNU_SOURCE /* renameat2 */
#include "output.h"

#include "cli.h"
#include "file_io.h"
#include "io.h"
#include "seal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cli_out_open(cli_out *o, const char *path, const char *const *inputs, size_t n)
{
    return cli_out_open_ex(o, path, inputs, n, 1);
}

/* An object: uploaded as it is written, in place when committed. */
static int open_object(cli_out *o, const char *path, const char *const *inputs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(path, inputs[i]))
            return cli_runtime_error("%s: the output would overwrite the input %s", path,
                                     inputs[i]);
    tq_ctx *ctx = tq_ctx_new();
    if (!ctx) return cli_runtime_error("out of memory");
    int rc = tq_sink_open(ctx, path, &o->sink, &o->f) ? cli_lib_error(ctx) : 0;
    tq_ctx_free(ctx);
    return rc;
}

/* Something that is not a regular file (a device, a FIFO, a link to one): written into as a
 * stream, as `cat > /dev/null` does; never replaced by a file. */
static int open_stream(cli_out *o, const char *path)
{
    int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return cli_runtime_error("%s: %s", path, strerror(errno));
    o->f = fdopen(fd, "wb");
    if (!o->f) {
        close(fd);
        return cli_runtime_error("out of memory");
    }
    o->is_stream = 1;
    o->path = strdup(path);
    return o->path ? 0 : cli_runtime_error("out of memory");
}

int cli_out_open_ex(cli_out *o, const char *path, const char *const *inputs, size_t n, int durable)
{
    memset(o, 0, sizeof *o);
    if (!strcmp(path, "-")) {
        o->f = stdout;
        o->is_stdout = 1;
        return 0;
    }
    if (tq_io_is_object(path)) return open_object(o, path, inputs, n);
    for (size_t i = 0; i < n; i++)
        if (tq_same_file(path, inputs[i]))
            return cli_runtime_error("%s: the output would overwrite the input %s", path,
                                     inputs[i]);
    struct stat st;
    char *target = NULL;
    if (!stat(path, &st) && !S_ISREG(st.st_mode)) return open_stream(o, path);
    if (!lstat(path, &st) && S_ISLNK(st.st_mode)) { /* to a regular file: replaced there */
        target = realpath(path, NULL);
        if (!target)
            return cli_runtime_error("%s: a link to nothing: give a file's name", path);
        path = target;
    }
    o->durable = durable;
    o->path = strdup(path);
    free(target); /* path is o->path's from here */
    if (!o->path) return cli_runtime_error("out of memory");
    tq_ctx *ctx = tq_ctx_new();
    if (!ctx || tq_temp_create_ex(ctx, o->path, durable, &o->tmp, &o->f)) {
        int rc = ctx ? cli_lib_error(ctx) : cli_runtime_error("out of memory");
        tq_ctx_free(ctx);
        free(o->path);
        o->path = NULL;
        return rc;
    }
    tq_ctx_free(ctx);
    return 0;
}

/* The finished temporary file into place.  Renamed over an existing file,
 * ext4 writes the new file's blocks out at once (auto_da_alloc): 0.27 s for
 * a 454 MB decoded state, a third of the whole decode.  An output made
 * without fsync trades that for the page cache's usual write-back: the two
 * files are exchanged (as atomic as a rename) and the old one removed. */
static int put_in_place(const cli_out *o)
{
    struct stat st;
    if (!o->durable && !stat(o->path, &st) && S_ISREG(st.st_mode) &&
        !renameat2(AT_FDCWD, o->tmp, AT_FDCWD, o->path, RENAME_EXCHANGE)) {
        unlink(o->tmp); /* now the old file */
        return 0;
    }
    return rename(o->tmp, o->path);
}

int cli_out_seal(cli_out *o)
{
    if (!tq_seal_keys_current()) return 0;
    tq_ctx *ctx = tq_ctx_new();
    FILE *plain = NULL;
    int rc = !ctx ? cli_runtime_error("out of memory") : 0;
    if (ctx && tq_sealer_begin(ctx, tq_seal_keys_current(), o->f, &o->sealer, &plain))
        rc = cli_lib_error(ctx);
    tq_ctx_free(ctx);
    if (rc) return rc;
    o->dst = o->f;
    o->f = plain;
    return 0;
}

/* The sealer's last segment written (before the output is flushed and put in place). */
static int finish_seal(cli_out *o)
{
    if (!o->sealer) return 0;
    tq_ctx *ctx = tq_ctx_new();
    int rc = !ctx ? cli_runtime_error("out of memory") : 0;
    if (ctx && tq_sealer_finish(ctx, o->sealer))
        rc = cli_runtime_error("%s: %s", o->path ? o->path : "stdout", tq_ctx_error(ctx));
    if (!ctx) tq_sealer_abort(o->sealer);
    tq_ctx_free(ctx);
    o->sealer = NULL;
    o->f = o->dst;
    return rc;
}

int cli_out_commit(cli_out *o)
{
    int rc_seal = finish_seal(o);
    if (rc_seal) {
        cli_out_abort(o);
        return rc_seal;
    }
    if (o->sink) {
        tq_ctx *ctx = tq_ctx_new();
        int rc = !ctx ? cli_runtime_error("out of memory") : 0;
        if (ctx && tq_sink_commit(ctx, o->sink)) rc = cli_lib_error(ctx);
        tq_ctx_free(ctx);
        memset(o, 0, sizeof *o);
        return rc;
    }
    if (o->is_stdout)
        return fflush(stdout) ? cli_runtime_error("writing to stdout failed: %s", strerror(errno))
                              : 0;
    if (o->is_stream) {
        int bad = fflush(o->f) != 0;
        bad |= fclose(o->f) != 0;
        int rc = bad ? cli_runtime_error("%s: writing failed: %s", o->path, strerror(errno)) : 0;
        free(o->path);
        memset(o, 0, sizeof *o);
        return rc;
    }
    int bad = fflush(o->f) != 0; /* the temporary file's stream fsyncs as it closes */
    bad |= fclose(o->f) != 0;
    o->f = NULL;
    if (bad || put_in_place(o)) {
        int rc = cli_runtime_error("%s: writing failed: %s", o->path, strerror(errno));
        cli_out_abort(o);
        return rc;
    }
    tq_temp_forget(o->tmp);
    free(o->tmp);
    free(o->path);
    o->tmp = o->path = NULL;
    return 0;
}

const char *cli_out_error(const cli_out *o)
{
    const char *e = o->sink ? tq_sink_error(o->sink) : "";
    return *e ? e : NULL;
}

void cli_out_abort(cli_out *o)
{
    if (o->sealer) {
        tq_sealer_abort(o->sealer);
        o->sealer = NULL;
        o->f = o->dst;
    }
    if (o->sink) {
        tq_sink_abort(o->sink);
        memset(o, 0, sizeof *o);
        return;
    }
    if (o->is_stdout) return;
    if (o->tmp) unlink(o->tmp); /* first: a discarded output is not synced (a stream's bytes
                                   are gone already) */
    tq_temp_forget(o->tmp);
    if (o->f) fclose(o->f);
    free(o->tmp);
    free(o->path);
    memset(o, 0, sizeof *o);
}
