/* signs.c - the sign vectors of the randomized Hadamard transforms.
 * The fork's vectors are stored as the byte masks published with it (they
 * come from NumPy's PCG64, which we do not reimplement); every other group
 * size or seed uses the generator specified in lib/SIGNS.md. */
#include "tq_internal.h"

const uint8_t tq_fork_s1_mask[16] = {0x59, 0x03, 0x6a, 0xe4, 0x49, 0x59, 0xf8, 0x42,
                                     0xbb, 0x3b, 0xc6, 0xa4, 0xa9, 0x50, 0xf2, 0x49};
const uint8_t tq_fork_s2_mask[16] = {0x90, 0xee, 0xac, 0x16, 0xdc, 0x8f, 0x62, 0x3f,
                                     0x7a, 0x35, 0xa5, 0xb7, 0x62, 0x65, 0xa5, 0xbe};
const uint8_t tq_fork_w32_mask[4] = {0x4a, 0x4b, 0x6b, 0x69};

static void from_mask(const uint8_t *mask, uint32_t n, float *s)
{
    for (uint32_t i = 0; i < n; i++) s[i] = (mask[i / 8] >> (i % 8)) & 1 ? -1.0f : 1.0f;
}

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void tq_signs_generate(uint32_t g, uint64_t seed, float *s1, float *s2)
{
    uint64_t state = seed ^ ((uint64_t)g * 0xD1B54A32D192ED03ull);
    float *dst[2] = {s1, s2};
    for (int v = 0; v < 2; v++) {
        uint64_t word = 0;
        for (uint32_t i = 0; i < g; i++) {
            if (i % 64 == 0) word = splitmix64(&state);
            dst[v][i] = (word >> (i % 64)) & 1 ? -1.0f : 1.0f;
        }
    }
}

tq_status tq_signs_kv(tq_ctx *ctx, uint32_t g, uint64_t seed, float *s1, float *s2)
{
    TQ_NEED_CTX(ctx);
    if (!tq_is_pow2(g) || g < TQ_RHT_MIN || g > TQ_RHT_MAX)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "group size %u is not a power of two in [%d, %d]",
                                g, TQ_RHT_MIN, TQ_RHT_MAX);
    if (seed == TQ_SEED_FORK && (g == 64 || g == 128)) {
        from_mask(tq_fork_s1_mask, g, s1);
        from_mask(tq_fork_s2_mask, g, s2);
    } else {
        tq_signs_generate(g, seed, s1, s2);
    }
    return TQ_OK;
}

void tq_signs_weight32(float s[32]) { from_mask(tq_fork_w32_mask, 32, s); }
