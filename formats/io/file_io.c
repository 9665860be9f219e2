/* file_io.c - see file_io.h. */
#define _GNU_SOURCE /* fopencookie, sync_file_range */
#include "file_io.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

tq_status tq_map_file(tq_ctx *ctx, const char *path, uint64_t min_size, const char *what,
                      const uint8_t **map, uint64_t *size)
{
    *map = NULL;
    *size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int stream_name = !strcmp(path, "-") || !strncmp(path, "s3://", 5);
    if (fd < 0 && errno == ENOENT && stream_name) /* the readers of streams spool them first */
        return tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: this input is read from a file, not from a "
                                "pipe or an object: give its path", path);
    if (fd < 0)
        return tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb)) {
        close(fd);
        return tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: not a regular file", path);
    }
    if ((uint64_t)sb.st_size < min_size || sb.st_size == 0) {
        close(fd);
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: %s (%lld bytes: too short)", path, what,
                                (long long)sb.st_size);
    }
    void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: cannot map: %s", path, strerror(errno));
    *map = m;
    *size = (uint64_t)sb.st_size;
    return TQ_OK;
}

void tq_unmap_file(const uint8_t *map, uint64_t size)
{
    if (map) munmap((void *)map, (size_t)size);
}

/* The stream behind a temporary output.  Dirty pages are handed to the disk
 * every 32 MiB as they are written, so the fsync at the end finds little
 * left and the disk works while the producer computes; closing fsyncs the
 * file unless it was unlinked first (a discarded output need not reach the
 * disk). */
#define WRITEBACK_STEP (4u << 20)

typedef struct sink {
    int fd;
    uint64_t written, synced;
    int durable; /* 0: neither writeback nor fsync (an output that can be made again) */
} sink;

static ssize_t sink_write(void *cookie, const char *buf, size_t n)
{
    sink *k = cookie;
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
    if (k->durable && k->written - k->synced >= WRITEBACK_STEP) {
        sync_file_range(k->fd, (off_t)k->synced, (off_t)(k->written - k->synced),
                        SYNC_FILE_RANGE_WRITE);
        k->synced = k->written;
    }
    return (ssize_t)n;
}

static int sink_close(void *cookie)
{
    sink *k = cookie;
    struct stat sb;
    int bad = k->durable && !fstat(k->fd, &sb) && sb.st_nlink > 0 && fsync(k->fd);
    int e = errno;
    bad |= close(k->fd) != 0;
    free(k);
    errno = e;
    return bad ? -1 : 0;
}

tq_status tq_temp_create(tq_ctx *ctx, const char *path, char **tmp, FILE **f)
{
    return tq_temp_create_ex(ctx, path, 1, tmp, f);
}

/* The temporaries a signal removes: a fixed table (no allocation in the handler); a slot is
 * taken by the newest when all are in use (an old one renamed already: its unlink fails). */
enum { TEMP_SLOTS = 64, TEMP_PATH = 4096 };
static char temp_paths[TEMP_SLOTS][TEMP_PATH];
static volatile sig_atomic_t temp_next;

/* Threads (the proxy's requests and saves) track and forget at once: one at a time.  The
 * signal handler reads without it: a slot is never half a name (its first byte goes last). */
static pthread_mutex_t temp_lock = PTHREAD_MUTEX_INITIALIZER;

void tq_temp_track(const char *tmp)
{
    if (strlen(tmp) >= TEMP_PATH) return;
    pthread_mutex_lock(&temp_lock);
    int at = -1;
    for (int i = 0; i < TEMP_SLOTS && at < 0; i++)
        if (!temp_paths[i][0]) at = i;
    if (at < 0) at = temp_next++ % TEMP_SLOTS;
    temp_paths[at][0] = 0; /* never a half-written name for the handler */
    memcpy(temp_paths[at] + 1, tmp + 1, strlen(tmp));
    temp_paths[at][0] = tmp[0];
    pthread_mutex_unlock(&temp_lock);
}

void tq_temp_forget(const char *tmp)
{
    pthread_mutex_lock(&temp_lock);
    for (int i = 0; tmp && i < TEMP_SLOTS; i++)
        if (temp_paths[i][0] && !strcmp(temp_paths[i], tmp)) temp_paths[i][0] = 0;
    pthread_mutex_unlock(&temp_lock);
}

/* A copy made unnamed (tq_temp_unname) is named by its descriptor: closed, not unlinked. */
#define TQ_FD_PREFIX "/proc/self/fd/"

void tq_temp_discard(char *tmp)
{
    if (tmp && !strncmp(tmp, TQ_FD_PREFIX, strlen(TQ_FD_PREFIX)))
        close(atoi(tmp + strlen(TQ_FD_PREFIX)));
    else if (tmp)
        unlink(tmp);
    tq_temp_forget(tmp);
    free(tmp);
}

int tq_temp_unname(char **tmp)
{
    char name[64];
    struct stat st;
    if (stat(TQ_FD_PREFIX, &st) || !S_ISDIR(st.st_mode)) return 0; /* no /proc: it keeps a name */
    int kept = open(*tmp, O_RDONLY | O_CLOEXEC);
    if (kept < 0) return 0;
    snprintf(name, sizeof name, TQ_FD_PREFIX "%d", kept);
    char *by_fd = strdup(name);
    if (!by_fd) {
        close(kept);
        return 0;
    }
    unlink(*tmp);
    tq_temp_forget(*tmp);
    free(*tmp);
    *tmp = by_fd;
    return 1;
}

void tq_temp_remove_all(void)
{
    for (int i = 0; i < TEMP_SLOTS; i++)
        if (temp_paths[i][0]) unlink(temp_paths[i]);
}

tq_status tq_temp_create_ex(tq_ctx *ctx, const char *path, int durable, char **tmp, FILE **f)
{
    *f = NULL;
    *tmp = malloc(strlen(path) + 16);
    if (!*tmp) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    sprintf(*tmp, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(*tmp);
    if (fd < 0) {
        tq_status st = tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: cannot create a file beside it: %s",
                                        path, strerror(errno));
        free(*tmp);
        *tmp = NULL;
        return st;
    }
    tq_temp_track(*tmp);
    mode_t um = umask(0); /* mkstemp makes 0600; give what a new file would get */
    umask(um);
    fchmod(fd, 0666 & ~um);
    sink *k = malloc(sizeof *k);
    cookie_io_functions_t io = {NULL, sink_write, NULL, sink_close};
    if (k) *k = (sink){fd, 0, 0, durable};
    *f = k ? fopencookie(k, "w", io) : NULL;
    if (!*f) {
        tq_status st =
            tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        free(k);
        close(fd);
        unlink(*tmp);
        tq_temp_forget(*tmp);
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

const char *tq_temp_dir(void)
{
    const char *d = getenv("TMPDIR");
    return d && *d ? d : "/tmp";
}

tq_status tq_read_regular(tq_ctx *ctx, const char *path, uint64_t limit, uint8_t **p,
                          uint64_t *n)
{
    *p = NULL;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat sb;
    if (fd < 0) return tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: %s", path, strerror(errno));
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size > limit) {
        close(fd);
        return tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: not a regular file of at most %llu bytes",
                                path, (unsigned long long)limit);
    }
    uint64_t size = (uint64_t)sb.st_size;
    uint64_t got = 0;
    *p = malloc(size ? size : 1);
    while (*p && got < size) {
        ssize_t k = read(fd, *p + got, size - got);
        if (k <= 0) break;
        got += (uint64_t)k;
    }
    close(fd);
    if (*p && got == size) {
        *n = size;
        return TQ_OK;
    }
    free(*p);
    *p = NULL;
    return tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: cannot be read", path);
}
