/* rans_impl.h - what lib/rans.c shares with its vector decoder (lib/rans_avx512.c): the
 * stream's constants and one decoder lane.  The stream's layout is rans.c's. */
#ifndef TQ_RANS_IMPL_H
#define TQ_RANS_IMPL_H

#include <stddef.h>
#include <stdint.h>

#define RANS_BITS 12                  /* frequencies in units of 2^-12 */
#define RANS_TOTAL (1u << RANS_BITS)
#define RANS_LOW (1u << 23)           /* the state stays in [RANS_LOW, RANS_LOW << 8) */

/* One lane of the decoder: slot[2^RANS_BITS], the symbol each slot of the state decodes to
 * (4 bytes more, so that a vector's 4-byte read of the last slot stays inside), and the
 * symbols' frequencies and starts: four lanes' tables stay in L1 (as one u32 a slot, 64 KB,
 * they did not, and decoding took 8% longer); both packed in one word for the vector decoder
 * (fc: freq | cum << 13); the coded bytes and the state. */
typedef struct rans_dec_lane {
    uint8_t slot[RANS_TOTAL + 4];
    uint32_t freq[256], cum[256];
    uint32_t fc[256];
    const uint8_t *p, *end;
    uint32_t x;
} rans_dec_lane;

/* The lanes the vector decoder runs at once: two vectors of 16, so that one's table reads
 * wait while the other's run. */
#define RANS_VEC_LANES 32

/* RANS_VEC_LANES lanes in lockstep with AVX-512 from symbol i0 while each has two coded bytes
 * left, as rans.c's scalar loop: sym[lanes][n]; returns the symbol reached (i0 where the CPU
 * or the build lacks AVX-512, or the lanes' bytes lie over 2 GB apart). */
size_t tq_rans_dec_avx512(rans_dec_lane *lane, uint8_t *sym, size_t n, size_t i0);

#endif
