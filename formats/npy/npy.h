/*
 * npy.h - the NumPy .npy array header (format versions 1.0, 2.0, 3.0).
 *
 * A .npy file is a magic string, a version, a little-endian header length
 * and a Python dict literal {'descr': ..., 'fortran_order': ..., 'shape':
 * (...)} padded with spaces to a multiple of 64 bytes; the raw array data
 * follows.  Only what tq needs is understood: simple dtypes by their descr
 * string and C or Fortran order.  See NPY.md.
 */
#ifndef TQ_NPY_H
#define TQ_NPY_H

#include <stddef.h>
#include <stdint.h>

#define TQ_NPY_MAX_DIMS   8
#define TQ_NPY_MAX_HEADER (1u << 20) /* numpy itself refuses headers past ~10 KB */

typedef struct tq_npy_header {
    uint32_t header_len; /* bytes before the data: magic .. padding */
    char descr[16];      /* e.g. "<f4"; "" when not a simple type string */
    int fortran_order;
    int ndim;
    uint64_t shape[TQ_NPY_MAX_DIMS];
    uint64_t count;    /* product of shape */
    uint32_t itemsize; /* from descr; 0 when not understood */
} tq_npy_header;

/* Parses the header at p (size bytes available, data may follow).  Returns 0,
 * or -1 with a reason in err (one line).  A descr that is not a plain
 * "<f4"-style string (structured dtypes, object arrays) parses, with
 * descr "" and itemsize 0; an element count that overflows does not. */
int tq_npy_parse(const uint8_t *p, uint64_t size, tq_npy_header *h, char *err, size_t errlen);

/* Writes a version 1.0 header (or 2.0 if it needs more than 64 KiB) for a
 * C-order array into out (at least 128 + 24 * ndim bytes); returns its
 * length, a multiple of 64. */
uint32_t tq_npy_format(char *out, const char *descr, int ndim, const uint64_t *shape);

#endif
