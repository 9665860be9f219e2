/* fork_revisions.c - the TurboQuant+ fork's revisions, a row each (lib/TURBO_REVISIONS.md):
 * the type ids a build of it gives its five types and the KV blocks it writes under them.
 * Its codebooks are constants of a file format, typed in from the fork (ggml-turbo-quant.c),
 * not recomputed: the old 4-bit table in particular is empirical, and the fork's typed
 * midpoints, not ours, decide an index.  Adding a revision is a row here (and, for blocks
 * no row has yet, their tables above it and golden vectors in tests/golden/NAME):
 * HACKING.md, "Adding a fork revision". */
#include "tq_internal.h"

#include <string.h>

/* ---- the KV codebooks: centroids and the midpoints the fork compares against */

/* The fork at 69d8e4be4 (May 2026). */
static const float kv2_c[4] = {-0.133462f, -0.039994f, 0.039994f, 0.133462f};
static const float kv2_t[3] = {-0.086728f, 0.0f, 0.086728f};

static const float kv3_c[8] = {-0.190685f, -0.117832f, -0.065717f, -0.021460f,
                               0.021460f,  0.065717f,  0.117832f,  0.190685f};
static const float kv3_t[7] = {-0.154259f, -0.091775f, -0.043589f, 0.0f,
                               0.043589f,  0.091775f,  0.154259f};

static const float kv4_c[16] = {
    -0.173926f, -0.117195f, -0.089527f, -0.068756f, -0.051262f, -0.035597f, -0.020989f, -0.006938f,
    0.006938f,  0.020989f,  0.035597f,  0.051262f,  0.068756f,  0.089527f,  0.117195f,  0.173926f};
static const float kv4_t[15] = {-0.145560f, -0.103361f, -0.079142f, -0.060009f, -0.043430f,
                                -0.028293f, -0.013963f, 0.0f,       0.013963f,  0.028293f,
                                0.043430f,  0.060009f,  0.079142f,  0.103361f,  0.145560f};

/* After the fork's PR #197 (2026-06-26): converged Lloyd-Max tables for N(0, 1/128) and the
 * midpoints the fork's nearest_centroid_3bit / _4bit compare against. */
static const float kv3n_c[8] = {-0.190207f, -0.118786f, -0.066822f, -0.021663f,
                                0.021663f,  0.066822f,  0.118786f,  0.190207f};
static const float kv3n_t[7] = {-0.154496f, -0.092804f, -0.044243f, 0.0f,
                                0.044243f,  0.092804f,  0.154496f};

static const float kv4n_c[16] = {
    -0.241529f, -0.182877f, -0.143016f, -0.111036f, -0.083292f, -0.058050f, -0.034299f, -0.011349f,
    0.011349f,  0.034299f,  0.058050f,  0.083292f,  0.111036f,  0.143016f,  0.182877f,  0.241529f};
static const float kv4n_t[15] = {-0.212203f, -0.162947f, -0.127026f, -0.097164f, -0.070671f,
                                 -0.046174f, -0.022824f, 0.0f,       0.022824f,  0.046174f,
                                 0.070671f,  0.097164f,  0.127026f,  0.162947f,  0.212203f};

static const tq_codebook kv2 = {2, 4, kv2_c, kv2_t, 0.0};
static const tq_codebook kv3 = {3, 8, kv3_c, kv3_t, 0.0};
static const tq_codebook kv4 = {4, 16, kv4_c, kv4_t, 0.0};
static const tq_codebook kv3n = {3, 8, kv3n_c, kv3n_t, 0.0};
static const tq_codebook kv4n = {4, 16, kv4n_c, kv4n_t, 0.0};

/* ---- the blocks: layout, bytes of 128 values, codebook */

typedef struct fork_block {
    tq_layout layout;
    uint32_t bytes;
    const tq_codebook *book;
} fork_block;

typedef struct fork_row {
    tq_fork_revision rev;
    fork_block turbo[3]; /* turbo2, turbo3, turbo4 */
} fork_row;

/* turbo2 {norm; qs[32]}; turbo3 {norm; qs[32]; signs[16]}; turbo4 {norm; rnorm; qs[64]} until
 * PR #197, then {norm; qs[64]} (turbo2's layout at 4 bits) */
#define T2_MAY {TQ_LAYOUT_TURBO2, 34, &kv2}
#define T3_MAY {TQ_LAYOUT_TURBO3, 50, &kv3}
#define T4_MAY {TQ_LAYOUT_TURBO4, 68, &kv4}
#define T3_197 {TQ_LAYOUT_TURBO3, 50, &kv3n}
#define T4_197 {TQ_LAYOUT_TURBO2, 66, &kv4n}

/* The rows.  name: a commit of the fork or of a branch of it (a build's version string names
 * it), or its PR; up: the upstream ggml ids it keeps (0..up); t2..w4: its ids of turbo2, turbo3,
 * turbo4, tq3_1s, tq4_1s (-1: none); the first row is what a file that names no revision
 * means.  Their order is their number (tq_type_profile): rows are added at the end.
 *   69d8e4be4  the fork in May 2026
 *   00910b10   the "+1" revision
 *   45f8a066   April 2026
 *   upstream   ggml d99724f2: Q1_0 41, Q2_0 42, nothing beyond
 *   pr197      the fork since its PR #197 (2026-06-26): 69d8e4be4's ids, new blocks
 *   010d04edc  a merge with upstream b10164 (sxlmnwb): pr197's blocks under new ids */
/* clang-format off */
static const fork_row rows[] = {
    /* name        up  t2  t3  t4  w3  w4  flags            turbo2  turbo3  turbo4 */
    {{"69d8e4be4", 41, 42, 43, 44, 45, 46, 0},              {T2_MAY, T3_MAY, T4_MAY}},
    {{"00910b10",  42, 43, 44, 45, 46, 47, 0},              {T2_MAY, T3_MAY, T4_MAY}},
    {{"45f8a066",  40, 43, 41, 42, 44, 45, 0},              {T2_MAY, T3_MAY, T4_MAY}},
    {{"upstream",  42, -1, -1, -1, -1, -1, 0},              {T2_MAY, T3_MAY, T4_MAY}},
    {{"pr197",     41, 42, 43, 44, 45, 46, TQ_FORK_NEWEST}, {T2_MAY, T3_197, T4_197}},
    {{"010d04edc", 42, 43, 44, 47, 45, 46, 0},              {T2_MAY, T3_197, T4_197}},
#ifdef TQ_FORK_TEST_ROW /* tests/cli/fork_rows.sh: a row added as a new revision would be */
    {{"testrow",   42, 50, 51, 52, 48, 49, 0},              {T2_MAY, T3_197, T4_197}},
#endif
};
/* clang-format on */

#define N_ROWS (sizeof rows / sizeof rows[0])
_Static_assert(N_ROWS <= TQ_FORK_MAX_REVISIONS, "raise TQ_FORK_MAX_REVISIONS");

uint32_t tq_fork_revision_count(void) { return (uint32_t)N_ROWS; }

const tq_fork_revision *tq_fork_revision_at(uint32_t rev)
{
    return rev < N_ROWS ? &rows[rev].rev : NULL;
}

static int same_block(const fork_block *a, const fork_block *b)
{
    return a->layout == b->layout && a->bytes == b->bytes && a->book == b->book;
}

/* The first row that writes rev's block of these bits: revisions that share a block share
 * its element type and codec. */
static uint32_t first_with(uint32_t rev, uint32_t bits)
{
    uint32_t r = 0;
    while (!same_block(&rows[r].turbo[bits - 2], &rows[rev].turbo[bits - 2])) r++;
    return r;
}

tq_dtype tq_fork_dtype(uint32_t rev, uint32_t bits)
{
    if (rev >= N_ROWS || bits < 2 || bits > 4) return TQ_DT_COUNT; /* no such type */
    uint32_t r = first_with(rev, bits);
    if (!r) return (tq_dtype)(TQ_DT_TURBO2 + (int)bits - 2);
    return (tq_dtype)(TQ_DT_COUNT + 3 * r + bits - 2);
}

int tq_fork_dtype_of(tq_dtype t, uint32_t *rev, uint32_t *bits)
{
    if (t >= TQ_DT_TURBO2 && t <= TQ_DT_TURBO4) {
        *rev = 0;
        *bits = (uint32_t)(t - TQ_DT_TURBO2) + 2;
        return 1;
    }
    if ((int)t < (int)TQ_DT_COUNT || (uint32_t)t >= TQ_DT_COUNT + 3 * N_ROWS) return 0;
    uint32_t k = (uint32_t)t - TQ_DT_COUNT;
    if (first_with(k / 3, k % 3 + 2) != k / 3) return 0; /* numbered by the first row only */
    *rev = k / 3;
    *bits = k % 3 + 2;
    return 1;
}

void tq_fork_block(uint32_t rev, uint32_t bits, tq_fork_block_info *out)
{
    uint32_t r = first_with(rev, bits);
    const fork_block *b = &rows[r].turbo[bits - 2];
    out->layout = b->layout;
    out->bytes = b->bytes;
    out->book = b->book;
    out->first = r ? rows[r].rev.name : NULL;
}
