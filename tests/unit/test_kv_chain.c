/* test_kv_chain.c - the rows' way into the codec and back (formats/snapshot/kv_chain.c): the
 * decode's chain undoes the encode's, with a pre-RoPE offset and with a plain one, each with
 * InnerQ scales. */
#include "harness.h"
#include "kv_chunk.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { ROWS = 5, WIDTH = 128, HEAD = 64 };

/* Rows through tq_kvsnap_rows_to_code then tq_kvsnap_rows_from_code: the largest difference
 * from where they started, and whether the way in changed them at all. */
static double round_trip(const tqkv_record *t, int *changed)
{
    float x[ROWS * WIDTH]; /* [ROWS][WIDTH] */
    float y[ROWS * WIDTH]; /* [ROWS][WIDTH] */
    unsigned long long seed = 5;
    for (int i = 0; i < ROWS * WIDTH; i++) x[i] = (float)tq_test_randn(&seed);
    memcpy(y, x, sizeof x);
    tq_ctx *ctx = tq_test_ctx();
    double worst = INFINITY;
    if (!tq_kvsnap_rows_to_code(ctx, t, 2, ROWS, y)) {
        *changed = memcmp(x, y, sizeof x) != 0;
        if (!tq_kvsnap_rows_from_code(ctx, t, 2, ROWS, y)) {
            worst = 0;
            for (int i = 0; i < ROWS * WIDTH; i++) worst = fmax(worst, fabs(y[i] - x[i]));
        }
    }
    return worst;
}

TEST(the_decodes_chain_undoes_the_encodes_with_either_offset_and_scales)
{
    float offset[WIDTH];
    float scales[WIDTH];
    int32_t pos[2 + ROWS];
    for (int j = 0; j < WIDTH; j++) {
        offset[j] = 0.5f * (float)(j % 7) - 1.0f;
        scales[j] = 0.5f + (float)(j % 5) * 0.25f;
    }
    for (int r = 0; r < 2 + ROWS; r++) pos[r] = 100 + 3 * r;
    tqkv_record t = {.width = WIDTH, .group = HEAD, .offset = offset, .innerq = scales,
                     .innerq_n = WIDTH};
    t.rope = (tq_rope){HEAD, HEAD, TQ_PAIRS_HALVES, 10000.0f, 1.0f};
    for (int pre_rope = 0; pre_rope < 2; pre_rope++) {
        t.rope_pos = pre_rope ? pos : NULL;
        int changed = 0;
        double worst = round_trip(&t, &changed);
        CHECK(changed, "pre-RoPE %d: the way in left the rows as they were", pre_rope);
        CHECK(worst < 1e-5, "pre-RoPE %d: rows back %g off", pre_rope, worst);
    }
}
