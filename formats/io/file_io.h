/* file_io.h - the two file patterns every format shares: mapping an input
 * read-only, and creating an output that appears only when complete (a
 * temporary file beside the destination, renamed into place). */
#ifndef TQ_FILE_IO_H
#define TQ_FILE_IO_H

#include "tq.h"

#include <stdint.h>
#include <stdio.h>

/* Maps a regular file of at least min_size bytes; `what` names the format for
 * the message when it is shorter ("not a GGUF file", ...). */
tq_status tq_map_file(tq_ctx *ctx, const char *path, uint64_t min_size, const char *what,
                      const uint8_t **map, uint64_t *size);
void tq_unmap_file(const uint8_t *map, uint64_t size);

/* Creates PATH.tmp.XXXXXX with the permissions a new file would get and opens
 * it buffered for writing; *tmp receives its name (malloc'd).  The stream
 * starts writeback every 32 MiB as it is written, and fclose fsyncs it: a
 * zero from fflush and fclose means the bytes are on disk, ready to be
 * renamed into place.  Unlink a discarded output before fclose (no fsync). */
tq_status tq_temp_create(tq_ctx *ctx, const char *path, char **tmp, FILE **f);
/* durable 0: the same without writeback or fsync, for outputs derived from
 * a file that stays (a state decoded from its snapshot): the rename still
 * makes it appear complete, but a crash may lose it, and it can be made
 * again. */
tq_status tq_temp_create_ex(tq_ctx *ctx, const char *path, int durable, char **tmp, FILE **f);

/* Every temporary file tq_temp_create made and has not been told is gone: a signal handler
 * removes them (tq_temp_remove_all, async-signal-safe) so that Ctrl-C leaves no PATH.tmp.*
 * behind.  tq_temp_forget: renamed into place or removed. */
void tq_temp_forget(const char *tmp);
/* A file of tq's own made otherwise (a slot file a server wrote for tq) for the same care. */
void tq_temp_track(const char *tmp);
void tq_temp_remove_all(void);
/* A temporary copy done with (a spooled input, mapped or read): removed, forgotten and freed;
 * NULL is none. */
void tq_temp_discard(char *tmp);
/* A temporary still being written made nameless, so that no kill leaves it behind: opened
 * once more and unlinked, *tmp replaced by /proc/self/fd/N of that descriptor, which
 * tq_temp_discard closes.  0 (the name kept) where /proc is not mounted. */
int tq_temp_unname(char **tmp);

/* Where intermediate files go that have no output beside them: $TMPDIR,
 * else /tmp (what mkstemp's callers use). */
const char *tq_temp_dir(void);

/* 1 if a and b are the same existing file (device and inode). */
int tq_same_file(const char *a, const char *b);
/* A regular file's bytes (malloc'd), at most limit of them, opened without following a
 * symlink: TQ_ERR_IO naming path for anything else. */
tq_status tq_read_regular(tq_ctx *ctx, const char *path, uint64_t limit, uint8_t **p,
                          uint64_t *n);

#endif
