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
/* A tensor record's TENSOR_REC bytes in file order (TQKV.md, "tensor record"): each field's
 * offset in tqkv_record and its size.  TQKV_REC_CODEC is the codec byte (tq blocks with uniform
 * cells stored as TQKV_CODEC_TQ_UNIFORM_ID) and TQKV_REC_FLAGS the 3 flag bytes: the writer
 * computes them and the reader takes them apart. */
enum { TQKV_REC_CODEC = -1, TQKV_REC_FLAGS = -2 };
typedef struct tqkv_rec_field {
    int member; /* offsetof(tqkv_record, ...), or TQKV_REC_CODEC / TQKV_REC_FLAGS */
    int bytes;
} tqkv_rec_field;
extern const tqkv_rec_field tqkv_rec_fields[];
extern const int tqkv_n_rec_fields;

/* Whether a record carries the version 3 extension. */
int tqkv_has_extension(const tqkv_record *t);

#endif
