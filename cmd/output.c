/* output.c - see output.h. */
#include "output.h"

#include "cli.h"
#include "file_io.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cli_out_open(cli_out *o, const char *path, const char *const *inputs, size_t n)
{
    return cli_out_open_ex(o, path, inputs, n, 1);
}

int cli_out_open_ex(cli_out *o, const char *path, const char *const *inputs, size_t n, int durable)
{
    memset(o, 0, sizeof *o);
    if (!strcmp(path, "-")) {
        o->f = stdout;
        o->is_stdout = 1;
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        if (tq_same_file(path, inputs[i]))
            return cli_usage_error("%s: the output would overwrite the input %s", path, inputs[i]);
    o->path = strdup(path);
    if (!o->path) return cli_runtime_error("out of memory");
    tq_ctx *ctx = tq_ctx_new();
    if (!ctx || tq_temp_create_ex(ctx, path, durable, &o->tmp, &o->f)) {
        int rc = ctx ? cli_lib_error(ctx) : cli_runtime_error("out of memory");
        tq_ctx_free(ctx);
        free(o->path);
        o->path = NULL;
        return rc;
    }
    tq_ctx_free(ctx);
    return 0;
}

int cli_out_commit(cli_out *o)
{
    if (o->is_stdout)
        return fflush(stdout) ? cli_runtime_error("writing to stdout failed: %s", strerror(errno))
                              : 0;
    int bad = fflush(o->f) != 0; /* the temporary file's stream fsyncs as it closes */
    bad |= fclose(o->f) != 0;
    o->f = NULL;
    if (bad || rename(o->tmp, o->path)) {
        int rc = cli_runtime_error("%s: writing failed: %s", o->path, strerror(errno));
        cli_out_abort(o);
        return rc;
    }
    free(o->tmp);
    free(o->path);
    o->tmp = o->path = NULL;
    return 0;
}

void cli_out_abort(cli_out *o)
{
    if (o->is_stdout) return;
    if (o->tmp) unlink(o->tmp); /* first: a discarded output is not synced */
    if (o->f) fclose(o->f);
    free(o->tmp);
    free(o->path);
    memset(o, 0, sizeof *o);
}
