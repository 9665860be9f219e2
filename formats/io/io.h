/*
 * io.h - where a format's bytes come from and go when they are not a file of their own: standard
 * input and output ("-"), and objects in an S3-compatible store ("s3://bucket/key", s3.h).
 * Files stay mapped by their formats (file_io.h); this seam is for what cannot be mapped.
 *
 * A source is read once, front to back (a pipe), or by byte ranges (an object): a reader that
 * can say what it needs (a snapshot's header, index, then the chunks a decode wants) fetches
 * only that.  A sink is a stdio stream whose bytes appear under their name only when committed
 * (an object: a multipart upload completed; aborted, nothing appears and an older object of
 * that name stays), so the writers of every format write to it unchanged.
 */
#ifndef TQ_IO_H
#define TQ_IO_H

#include "tq.h"

#include <stdint.h>
#include <stdio.h>

/* 1 for a name this seam serves ("-" or s3://), 0 for a file name. */
int tq_io_is_stream(const char *name);
/* 1 for an s3:// name. */
int tq_io_is_object(const char *name);

typedef struct tq_src tq_src;

tq_status tq_src_open(tq_ctx *ctx, const char *name, tq_src **out); /* "-" or s3:// */
/* Bytes in memory as a source (tests, fuzzing): read in order, or by ranges when ranged. */
tq_status tq_src_open_memory(tq_ctx *ctx, const void *data, uint64_t size, const char *label,
                             int ranged, tq_src **out);
void tq_src_close(tq_src *s);
const char *tq_src_name(const tq_src *s);
/* 1: ranged reads (an object); 0: read once in order (a pipe). */
int tq_src_ranged(const tq_src *s);
/* An object to be read once, front to back, as one streamed GET: from now on it is read as a
 * pipe (tq_src_ranged 0), with no request before the first byte. */
void tq_src_sequential(tq_src *s);
/* A ranged source's size (its first read learns it). */
tq_status tq_src_size(tq_ctx *ctx, tq_src *s, uint64_t *size);
/* Ranged sources: bytes [off, off + n). */
tq_status tq_src_read_at(tq_ctx *ctx, tq_src *s, uint64_t off, void *buf, uint64_t n);
/* Objects (and memory), sequential or not: the first n bytes, or all when shorter (*got); the
 * size is learnt. */
tq_status tq_src_read_head(tq_ctx *ctx, tq_src *s, void *buf, uint64_t n, uint64_t *got);
/* Ranged sources: from now on tq_src_read delivers bytes [off, off + n), streamed. */
tq_status tq_src_stream(tq_ctx *ctx, tq_src *s, uint64_t off, uint64_t n);
/* The next bytes in order: n of them, *got less only at the end. */
tq_status tq_src_read(tq_ctx *ctx, tq_src *s, void *buf, uint64_t n, uint64_t *got);
/* Bytes received so far from the pipe or the store. */
uint64_t tq_src_received(const tq_src *s);
/* The source's first n bytes (n <= 64) without consuming them (a pipe keeps them for the next
 * read): what a front door bids on.  *got is less than n for a shorter source. */
tq_status tq_src_peek(tq_ctx *ctx, tq_src *s, void *buf, uint64_t n, uint64_t *got);
/* The first bytes (at most n <= 64) of any input a name gives, for the readers to bid on: a
 * file's (none where it cannot be opened: its reader says why), or a pipe's or an object's
 * through *src, opened and left to be read (NULL for a file). */
tq_status tq_io_peek(tq_ctx *ctx, const char *name, tq_src **src, void *buf, uint64_t n,
                     uint64_t *got);
/* The whole source into a temporary file under tq_temp_dir(), for a reader that must map its
 * input (a state to encode); *path is malloc'd: tq_temp_discard it (a copy
 * without a name where /proc is mounted: no kill leaves it). */
/* Whether the first n bytes of an input are of a kind the caller reads (a known magic). */
typedef int (*tq_src_known)(const uint8_t *head, size_t n);
tq_status tq_src_spool(tq_ctx *ctx, tq_src *s, tq_src_known known, char **path);

/* A name any reader takes: a file name as it is, "-" or s3:// spooled to a temporary file
 * (*tmp set: tq_temp_discard it once opened). */
tq_status tq_io_local(tq_ctx *ctx, const char *name, tq_src_known known, char **tmp,
                      const char **path);

typedef struct tq_sink tq_sink;

/* An s3:// object to write through *f (buffered stdio). */
tq_status tq_sink_open(tq_ctx *ctx, const char *name, tq_sink **out, FILE **f);
/* Flushes f and makes the object appear; f is closed either way. */
tq_status tq_sink_commit(tq_ctx *ctx, tq_sink *s);
/* Nothing appears; f is closed. */
void tq_sink_abort(tq_sink *s);
/* Why the last write to f failed ("" if none failed). */
const char *tq_sink_error(const tq_sink *s);

#endif
