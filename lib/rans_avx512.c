/* rans_avx512.c - rans.c's decoder on RANS_VEC_LANES streams at once with AVX-512: a stream a
 * vector lane, its table reads gathered.  The same arithmetic as rans.c's DEC_STEP on 32-bit
 * lanes, so the same symbols, or the same refusal, as the scalar loop.  Built for AVX-512 by
 * its functions' target, whatever the file's flags (the fuzzers' and sanitizers' builds too);
 * rans.c calls it where the context's SIMD level, which the CPU was asked for, is AVX-512. */
#include "rans_impl.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define RANS_AVX512 __attribute__((target("avx512f,avx512bw")))

#include <stdint.h>

enum { VEC = 16, NVEC = RANS_VEC_LANES / VEC };
_Static_assert(RANS_VEC_LANES % VEC == 0 && RANS_VEC_LANES <= 32, "whole vectors, one u32 mask");

/* One vector's lanes: state, where each one's bytes have reached and their last safe place
 * (offsets from the lowest stream's start), and where its tables lie in the lanes' array. */
typedef struct dec_vec {
    __m512i x, off, lim, slot_at, fc_at;
    __mmask16 reads; /* the lanes that read bytes: a one-symbol stream's state never moves */
} dec_vec;

/* One step of every lane of v: the symbol into byte t of acc.  The state's chain is a gather
 * of its slot, one of the symbol's (freq, cum), a multiply and the renormalization; the coded
 * bytes' gather waits only on the offsets.  rd: 2 bytes before the lowest stream's reading
 * place, so that a lane's 4-byte read ends with its next two bytes (rans.c's load_be16). */
static inline __attribute__((always_inline)) RANS_AVX512 void
dec_step(dec_vec *v, const void *tables, const uint8_t *rd, __m512i *acc, int t)
{
    const __m512i be16 = _mm512_set4_epi32(0x80800e0f, 0x80800a0b, 0x80800607, 0x80800203);
    __m512i r = _mm512_and_si512(v->x, _mm512_set1_epi32(RANS_TOTAL - 1));
    __m512i e = _mm512_i32gather_epi32(_mm512_add_epi32(v->slot_at, r), tables, 1);
    e = _mm512_and_si512(e, _mm512_set1_epi32(0xff));
    __m512i fc = _mm512_i32gather_epi32(_mm512_add_epi32(v->fc_at, _mm512_slli_epi32(e, 2)),
                                        tables, 1);
    __m512i w = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), v->reads, v->off, rd, 1);
    w = _mm512_shuffle_epi8(w, be16); /* the two bytes at the reading place, the first high */
    __m512i freq = _mm512_and_si512(fc, _mm512_set1_epi32(0x1fff));
    __m512i x = _mm512_mullo_epi32(freq, _mm512_srli_epi32(v->x, RANS_BITS));
    x = _mm512_add_epi32(x, _mm512_sub_epi32(r, _mm512_srli_epi32(fc, 13)));
    __mmask16 one = _mm512_cmplt_epu32_mask(x, _mm512_set1_epi32(RANS_LOW));
    __mmask16 two = _mm512_cmplt_epu32_mask(x, _mm512_set1_epi32(RANS_LOW >> 8));
    __m512i eight = _mm512_set1_epi32(8);
    __m512i b = _mm512_add_epi32(_mm512_maskz_mov_epi32(one, eight),
                                 _mm512_maskz_mov_epi32(two, eight)); /* 8 x the bytes taken */
    x = _mm512_sllv_epi32(x, b);
    v->x = _mm512_or_si512(x, _mm512_srlv_epi32(w, _mm512_sub_epi32(_mm512_set1_epi32(16), b)));
    v->off = _mm512_add_epi32(v->off, _mm512_srli_epi32(b, 3));
    *acc = _mm512_or_si512(*acc, _mm512_slli_epi32(e, 8 * t));
}

RANS_AVX512 size_t tq_rans_dec_avx512(rans_dec_lane *lane, uint8_t *sym, size_t n, size_t i0)
{
    const uint8_t *lo = lane[0].p, *hi = lane[0].end;
    for (int j = 1; j < RANS_VEC_LANES; j++) {
        lo = lane[j].p < lo ? lane[j].p : lo;
        hi = lane[j].end > hi ? lane[j].end : hi;
    }
    /* 32-bit offsets: the bytes, the tables and the output rows */
    if ((size_t)(hi - lo) > INT32_MAX / 2 || n > INT32_MAX / RANS_VEC_LANES) return i0;
    int32_t x[RANS_VEC_LANES], off[RANS_VEC_LANES], lim[RANS_VEC_LANES];
    int32_t slot_at[RANS_VEC_LANES], fc_at[RANS_VEC_LANES], row[RANS_VEC_LANES];
    uint32_t reads = 0;
    for (int j = 0; j < RANS_VEC_LANES; j++) {
        int one_symbol = lane[j].freq[lane[j].slot[0]] == RANS_TOTAL;
        x[j] = (int32_t)lane[j].x;
        off[j] = (int32_t)(lane[j].p - lo);
        lim[j] = (int32_t)(lane[j].end - 2 - lo); /* a step reads two bytes at most */
        if (one_symbol) lim[j] = INT32_MAX; /* no bytes to wait for */
        reads |= (uint32_t)!one_symbol << j;
        slot_at[j] = (int32_t)((const char *)lane[j].slot - (const char *)lane);
        fc_at[j] = (int32_t)((const char *)lane[j].fc - (const char *)lane);
        row[j] = (int32_t)((size_t)j * n);
    }
    dec_vec v[NVEC];
    for (int k = 0; k < NVEC; k++) {
        v[k].x = _mm512_loadu_si512(x + k * VEC);
        v[k].off = _mm512_loadu_si512(off + k * VEC);
        v[k].lim = _mm512_loadu_si512(lim + k * VEC);
        v[k].slot_at = _mm512_loadu_si512(slot_at + k * VEC);
        v[k].fc_at = _mm512_loadu_si512(fc_at + k * VEC);
        v[k].reads = (__mmask16)(reads >> (k * VEC));
    }
    const uint8_t *rd = lo - 2; /* inside: a stream's bytes start after its model and state */
    size_t i = i0;
    for (;;) {
        __m512i left = _mm512_sub_epi32(v[0].lim, v[0].off);
        for (int k = 1; k < NVEC; k++)
            left = _mm512_min_epi32(left, _mm512_sub_epi32(v[k].lim, v[k].off));
        int32_t least = _mm512_reduce_min_epi32(left);
        if (least < 0) break;
        size_t batch = (size_t)least / 2 + 1; /* steps every lane has bytes for */
        batch = batch < n - i ? batch : n - i;
        batch &= ~(size_t)3; /* four symbols a lane a store */
        if (!batch) break;
        for (size_t end = i + batch; i < end; i += 4) {
            __m512i acc[NVEC];
            for (int k = 0; k < NVEC; k++) acc[k] = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int t = 0; t < 4; t++)
                for (int k = 0; k < NVEC; k++) dec_step(&v[k], lane, rd, &acc[k], t);
            for (int k = 0; k < NVEC; k++)
                _mm512_i32scatter_epi32(sym + i + (size_t)k * VEC * n,
                                        _mm512_loadu_si512(row), acc[k], 1);
        }
    }
    for (int k = 0; k < NVEC; k++) {
        _mm512_storeu_si512(x + k * VEC, v[k].x);
        _mm512_storeu_si512(off + k * VEC, v[k].off);
    }
    for (int j = 0; j < RANS_VEC_LANES; j++) {
        lane[j].x = (uint32_t)x[j];
        lane[j].p = lo + off[j];
    }
    return i;
}

#else
size_t tq_rans_dec_avx512(rans_dec_lane *lane, uint8_t *sym, size_t n, size_t i0)
{
    (void)lane;
    (void)sym;
    (void)n;
    return i0;
}
#endif
