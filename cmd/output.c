/* output.c - see output.h. */
#include "output.h"

#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return !stat(a, &sa) && !stat(b, &sb) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
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
        if (same_file(path, inputs[i])) return cli_usage_error("%s: the output would overwrite the input %s", path, inputs[i]);
    o->path = strdup(path);
    o->tmp = malloc(strlen(path) + 16);
    if (!o->path || !o->tmp) return cli_runtime_error("out of memory");
    sprintf(o->tmp, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(o->tmp);
    if (fd < 0) {
        int rc = cli_runtime_error("%s: cannot create a file beside it: %s", path, strerror(errno));
        free(o->tmp), free(o->path);
        o->tmp = o->path = NULL;
        return rc;
    }
    mode_t um = umask(0);
    umask(um);
    fchmod(fd, 0666 & ~um);
    o->f = fdopen(fd, "wb");
    if (!o->f) {
        close(fd);
        cli_out_abort(o);
        return cli_runtime_error("%s: cannot open: %s", path, strerror(errno));
    }
    setvbuf(o->f, NULL, _IOFBF, 1 << 20);
    return 0;
}

int cli_out_commit(cli_out *o)
{
    if (o->is_stdout) return fflush(stdout) ? cli_runtime_error("writing to stdout failed: %s", strerror(errno)) : 0;
    int bad = fflush(o->f) || fsync(fileno(o->f));
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
