/*
 * s3.h - one object in an S3-compatible store (AWS S3, Ceph radosgw, MinIO, R2), named
 * s3://bucket/key, through libcurl: its CURLOPT_AWS_SIGV4 signs every request (Signature
 * Version 4), so tq holds no HTTP client and no signing code of its own.  Conventions
 * (S3.md): the AWS CLI's environment variables, path-style addressing for a custom endpoint,
 * retries with backoff on what S3 clients retry (5xx, throttling, a connection cut or
 * refused), each retry told to the note function.
 *
 * Reads are ranged GETs, or one streamed GET whose bytes a thread of its own hands over through
 * a bounded buffer.  Writes are one PUT when small, else a multipart upload whose parts go out
 * on threads of their own as they fill, a few in flight at most: the object appears only when
 * the upload completes, and an abort leaves any older object of that name as it was.
 */
#ifndef TQ_S3_H
#define TQ_S3_H

#include "tq.h"

#include <stdint.h>

typedef struct tq_s3 tq_s3;

/* 1 if name is an s3:// URL. */
int tq_s3_is_url(const char *name);
/* The object named by url, with the endpoint, region and credentials of the environment
 * (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION or
 * AWS_DEFAULT_REGION, AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL).  Nothing is sent yet. */
tq_status tq_s3_open(tq_ctx *ctx, const char *url, tq_s3 **out);
void tq_s3_close(tq_s3 *s);
const char *tq_s3_url(const tq_s3 *s);
/* Bytes received and sent over the connections of this object so far (bodies only). */
uint64_t tq_s3_bytes_in(const tq_s3 *s);
uint64_t tq_s3_bytes_out(const tq_s3 *s);
/* Where retries are told (the library never prints): msg is one line without a newline. */
void tq_s3_set_note(void (*note)(void *user, const char *msg), void *user);

/* The object's size (a GET of its first byte: a missing bucket or key is named). */
tq_status tq_s3_size(tq_ctx *ctx, tq_s3 *s, uint64_t *size);
/* Bytes [off, off + n) of the object, n > 0, into buf, or those up to its end: *got of them;
 * *size (may be NULL) its whole size.  Later reads of the same object are made on condition
 * that it has not changed (If-Match its ETag): a racing writer fails them rather than mixing
 * two objects. */
tq_status tq_s3_get(tq_ctx *ctx, tq_s3 *s, uint64_t off, uint64_t n, void *buf, uint64_t *got,
                    uint64_t *size);

/* Whether the last failed request failed for want of the object (HTTP 404, the bucket there). */
int tq_s3_missing(const tq_s3 *s);
/* DELETE: the object gone (none there is no error). */
tq_status tq_s3_delete(tq_ctx *ctx, tq_s3 *s);
/* The objects under s3://bucket/PREFIX (url), one level: cb(user, name after the prefix, size)
 * for each, in key order (ListObjectsV2, every page), and each folder below it (keys with a '/'
 * after the prefix) once, as a directory lists one: its name, size 0. */
tq_status tq_s3_list(tq_ctx *ctx, const char *url,
                     int (*cb)(void *user, const char *name, uint64_t size), void *user);

/* One streamed GET of bytes [off, off + n) (n UINT64_MAX, off 0: the whole object, whatever its
 * size), resumed where it stopped on a cut connection. */
typedef struct tq_s3_stream tq_s3_stream;
tq_status tq_s3_stream_open(tq_ctx *ctx, tq_s3 *s, uint64_t off, uint64_t n, tq_s3_stream **out);
/* Up to n bytes; *got 0 at the end of the range. */
tq_status tq_s3_stream_read(tq_ctx *ctx, tq_s3_stream *st, void *buf, uint64_t n, uint64_t *got);
void tq_s3_stream_close(tq_s3_stream *st);

/* An upload to the object: writes buffer parts, commit makes the object appear, abort (or a
 * failed commit) leaves the store as it was. */
typedef struct tq_s3_upload tq_s3_upload;
tq_status tq_s3_upload_begin(tq_ctx *ctx, tq_s3 *s, tq_s3_upload **out);
tq_status tq_s3_upload_write(tq_ctx *ctx, tq_s3_upload *u, const void *p, uint64_t n);
tq_status tq_s3_upload_commit(tq_ctx *ctx, tq_s3_upload *u); /* frees u */
void tq_s3_upload_abort(tq_s3_upload *u);                    /* frees u */

#endif
