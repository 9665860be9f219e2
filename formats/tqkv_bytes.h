/* tqkv_bytes.h - what the .tqkv writer (tqkv_write.c) and reader (tqkv_read.c) share of the
 * byte layout (tqkv.h numbers it, TQKV.md has the tables); not an API. */
#ifndef TQ_TQKV_BYTES_H
#define TQ_TQKV_BYTES_H

#include "tqkv.h"

#define HDR_LEN     32
#define TRAILER_LEN 32
#define CHUNK_HDR   44
#define TENSOR_REC  72
#define CHUNK_MAGIC 0x4b435154u /* "TQCK" */
/* Decoded sizes a snapshot may claim (a hostile file must not make the
 * reader allocate what it wants): one chunk, and the skeleton. */
#define MAX_PIECE (1ull << 30)
static const char MAGIC[4] = {'T', 'Q', 'K', 'V'};
static const char END_MAGIC[8] = {'T', 'Q', 'K', 'V', 'E', 'N', 'D', 0};

/* Flag bit 8's basis rows: an exponent below this one marks a row of zeros. */
enum { TQKV_BASIS8_MIN_EXP = -32 };
/* A basis row's exponent e (its values as q x 2^(e - 7), none above 1), INT32_MIN for a row
 * too small to keep. */
int tqkv_basis8_exp(const float *row, uint32_t d);
/* Whether a record carries the version 3 extension. */
int tqkv_has_extension(const tqkv_record *t);

#endif
