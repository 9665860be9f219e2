/* fuzz_rans_lanes.c - libFuzzer target: TQ_RANS_LANES rANS streams (lib/rans.c) decoded by
 * the scalar loops and by every SIMD level the CPU has (lib/rans_avx512.c) give the same
 * answer: the same refusal, or the same symbols.  The streams are coded from the input's
 * symbols, then their coded bytes (never their models, which the parser checks alone) are
 * changed by the rest of the input, so that the lanes run out of bytes, or end in a wrong
 * state, at different steps.
 *
 * Input: byte 0 and 1 the symbols a stream (1..1024); then lanes x n symbols (the input's
 * bytes masked to a lane's alphabet: lane j keeps its low 1 + j % 8 bits); then pairs (where,
 * xor) changing one coded byte each. */
#include "tq.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { LANES = TQ_RANS_LANES };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    static tq_ctx *ctx;
    if (!ctx) ctx = tq_ctx_new();
    size_t n = 1 + ((size_t)data[0] | (size_t)data[1] << 8) % 1024;
    if (size < 2 + LANES * n) return 0;
    uint8_t *sym = malloc(LANES * n); /* [lanes][n] */
    for (size_t i = 0; i < LANES * n; i++)
        sym[i] = data[2 + i] & (uint8_t)((2u << ((i / n) % 8)) - 1);
    size_t cap = tq_rans_bound(n), len[LANES], model[LANES], pos = 0;
    uint8_t *room = malloc(LANES * cap), *packed = malloc(LANES * cap), *out[LANES];
    const uint8_t *in[LANES];
    for (int j = 0; j < LANES; j++) out[j] = room + (size_t)j * cap;
    tq_ctx_set_simd(ctx, TQ_SIMD_SCALAR);
    if (tq_rans_encode_many(ctx, LANES, sym, n, out, cap, len)) abort();
    for (int j = 0; j < LANES; j++) {
        memcpy(packed + pos, out[j], len[j]);
        in[j] = packed + pos;
        /* the model (lib/rans.c: the largest symbol, a frequency of one or two bytes each),
           then the u32 length: the coded bytes after them */
        size_t at = 1;
        for (uint32_t s = 0; s <= in[j][0]; s++) at += in[j][at] & 128 ? 2 : 1;
        model[j] = at + 4;
        pos += len[j];
    }
    for (size_t p = 2 + LANES * n; p + 1 < size; p += 2) {
        int j = data[p] % LANES;
        size_t coded = len[j] - model[j];
        if (coded) packed[(size_t)(in[j] - packed) + model[j] + data[p] / LANES % coded] ^=
            data[p + 1];
    }
    uint8_t *want = malloc(LANES * n), *got = malloc(LANES * n);
    tq_status st_want = tq_rans_decode_many(ctx, LANES, in, len, want, n);
    for (int lvl = TQ_SIMD_AVX2; lvl <= TQ_SIMD_AVX512; lvl++) {
        if (tq_ctx_set_simd(ctx, (tq_simd)lvl)) continue; /* not on this CPU */
        tq_status st = tq_rans_decode_many(ctx, LANES, in, len, got, n);
        if (st != st_want || (!st && memcmp(got, want, LANES * n))) {
            fprintf(stderr, "%s: status %d, scalar %d%s\n", tq_simd_name((tq_simd)lvl), (int)st,
                    (int)st_want, st ? "" : ", other symbols");
            abort();
        }
    }
    free(sym);
    free(room);
    free(packed);
    free(want);
    free(got);
    return 0;
}
