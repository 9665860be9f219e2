/* file_io.c - see file_io.h. */
#include "file_io.h"
#include "tq_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

tq_status tq_map_file(tq_ctx *ctx, const char *path, uint64_t min_size, const char *what, const uint8_t **map,
                      uint64_t *size)
{
    *map = NULL;
    *size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tq_fail(ctx, TQ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb)) {
        close(fd);
        return tq_fail(ctx, TQ_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return tq_fail(ctx, TQ_ERR_FORMAT, "%s: not a regular file", path);
    }
    if ((uint64_t)sb.st_size < min_size || sb.st_size == 0) {
        close(fd);
        return tq_fail(ctx, TQ_ERR_FORMAT, "%s: %s (%lld bytes: too short)", path, what, (long long)sb.st_size);
    }
    void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return tq_fail(ctx, TQ_ERR_IO, "%s: cannot map: %s", path, strerror(errno));
    *map = m;
    *size = (uint64_t)sb.st_size;
    return TQ_OK;
}

void tq_unmap_file(const uint8_t *map, uint64_t size)
{
    if (map) munmap((void *)map, (size_t)size);
}

tq_status tq_temp_create(tq_ctx *ctx, const char *path, char **tmp, FILE **f)
{
    *f = NULL;
    *tmp = malloc(strlen(path) + 16);
    if (!*tmp) return tq_fail(ctx, TQ_ERR_NOMEM, "out of memory");
    sprintf(*tmp, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(*tmp);
    if (fd < 0) {
        tq_status st = tq_fail(ctx, TQ_ERR_IO, "%s: cannot create a file beside it: %s", path, strerror(errno));
        free(*tmp);
        *tmp = NULL;
        return st;
    }
    mode_t um = umask(0); /* mkstemp makes 0600; give what a new file would get */
    umask(um);
    fchmod(fd, 0666 & ~um);
    *f = fdopen(fd, "wb");
    if (!*f) {
        tq_status st = tq_fail(ctx, TQ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        close(fd);
        unlink(*tmp);
        free(*tmp);
        *tmp = NULL;
        return st;
    }
    setvbuf(*f, NULL, _IOFBF, 1 << 20);
    return TQ_OK;
}

int tq_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return !stat(a, &sa) && !stat(b, &sb) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}
