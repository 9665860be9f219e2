/* fuzz_block_decode.c - libFuzzer target: any bytes, read as blocks of any
 * codec configuration, decode without faults (blocks will come from files). */
#include "tq.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    static tq_ctx *ctx;
    if (!ctx) {
        ctx = tq_ctx_new();
        tq_ctx_set_threads(ctx, 1);
    }
    /* byte 0: codec kind and SIMD level; byte 1: group and bits */
    tq_codec_desc d = {0};
    d.kind = (tq_codec_kind)(1 + data[0] % 10); /* 1..10: every kind, both fork revisions */
    if (d.kind == TQ_CODEC_TQ || d.kind == TQ_CODEC_ANGLE) {
        d.group = 8u << (data[1] % 7);
        d.bits = 1 + (data[1] >> 3) % 8;
        d.norm_correction = data[0] >> 7;
        d.seed = data[1];
        if (d.kind == TQ_CODEC_ANGLE) d.radius_bits = data[1] >> 5;
    } else if (d.kind == TQ_CODEC_PROD) { /* groups up to 128: the sketch is g x g */
        d.group = 8u << (data[1] % 5);
        d.bits = 2 + (data[1] >> 3) % 7;
        d.seed = data[1];
    }
    tq_ctx_set_simd(ctx, (tq_simd)(1 + (data[0] >> 3) % 3)); /* refused levels keep the old one */
    tq_codec *c;
    if (tq_codec_new(ctx, &d, &c) != TQ_OK) return 0;
    size_t bb = tq_codec_block_bytes(c), bv = tq_codec_block_values(c);
    size_t nb = (size - 2) / bb;
    if (nb) {
        float *y = malloc(nb * bv * sizeof(float));
        tq_decode(ctx, c, data + 2, nb * bv, y);
        if (d.kind != TQ_CODEC_TQ3_1S && d.kind != TQ_CODEC_TQ4_1S) {
            tq_decode_rotated(ctx, c, data + 2, nb * bv, y);
            float *s = malloc(nb * sizeof(float)); /* scores against the first decoded block as the query */
            tq_scores(ctx, c, y, data + 2, nb, s);
            free(s);
        }
        free(y);
    }
    tq_codec_free(c);
    return 0;
}
