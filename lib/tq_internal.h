/* tq_internal.h - what libtq's modules share with each other (and with the
 * unit tests), never with cmd/. */
#ifndef TQ_INTERNAL_H
#define TQ_INTERNAL_H

#include <assert.h>
#include "tq.h"

#include <stdarg.h>

#define TQ_MSG_MAX 512

/* A loop-heavy function also built for x86-64-v3 (AVX2), chosen at load time where the
 * compiler can dispatch: the same IEEE operations a lane on twice the lanes (-ffp-contract=off
 * keeps FMA out), so the same bits on every machine */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__)
#define TQ_CLONES_V3 __attribute__((target_clones("default", "arch=x86-64-v3")))
#else
#define TQ_CLONES_V3
#endif

struct tq_ctx {
    tq_status status;
    char msg[TQ_MSG_MAX];
    int threads;
    tq_simd simd; /* resolved level, never AUTO */
    tq_backend backend;
};

/* tq.h: a NULL context is a programmer error; every public entry asserts. */
#define TQ_NEED_CTX(ctx)                                                                           \
    assert((ctx) && "libtq: a NULL context (tq.h: every fallible call takes one)")

int tq_resolve_threads(const tq_ctx *ctx);

/* A little-endian fp16 field of a block: read as float32, written from
 * float32 (round to nearest even). */
static inline float tq_get_h(const uint8_t *p)
{
    return tq_fp16_to_fp32((uint16_t)(p[0] | p[1] << 8));
}
static inline void tq_put_h(uint8_t *p, float f)
{
    uint16_t h = tq_fp32_to_fp16(f);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

/* ---- signs (lib/signs.c) */
extern const uint8_t tq_fork_s1_mask[16]; /* bit i%8 of byte i/8 set <=> -1 */
extern const uint8_t tq_fork_s2_mask[16];
extern const uint8_t tq_fork_w32_mask[4];
void tq_signs_generate(uint32_t g, uint64_t seed, float *s1, float *s2);

/* ---- RHT (lib/rht.c): no argument checks, g already validated */
float tq_rht_scale(uint32_t g);     /* (float)(1/sqrt(g)) */
void tq_fwht(float *x, uint32_t g); /* unnormalized butterfly, fork order */
void tq_rht_forward_raw(uint32_t g, const float *s1, const float *s2, float *x);
void tq_rht_inverse_raw(uint32_t g, const float *s1, const float *s2, float *x);

/* ---- codebooks (lib/codebook_*.c) */
const tq_codebook *tq_codebook_fork(tq_codebook_kind kind);
const tq_codebook *tq_codebook_exact(uint32_t g, uint32_t bits); /* NULL on OOM */
/* Uniform cells with the distortion of the Lloyd-Max codebook of bits - 1
 * (codebook_uniform.c); bits 2..8.  NULL on OOM. */
const tq_codebook *tq_codebook_uniform(uint32_t g, uint32_t bits);
double tq_uniform_exact(uint32_t g, uint32_t bits, double *centroids, double *thresholds);
/* The exact law's mass and first moment in the K cells that thresholds t
 * (K - 1 of them, increasing) cut [-1, 1] into; -1 on OOM. */
int tq_law_cells(uint32_t g, int K, const double *t, double *mass, double *mom);
/* Solves Lloyd-Max for the exact coordinate law; writes 2^bits centroids and
 * returns D_mse per unit vector. Exposed for tests. */
double tq_lloyd_max_exact(uint32_t g, uint32_t bits, double *centroids);

static inline uint32_t tq_cb_index(const tq_codebook *cb, float v)
{
    uint32_t k = 0;
    for (uint32_t t = 0; t + 1 < cb->size; t++) k += v >= cb->thresholds[t];
    return k;
}

/* ---- block layouts */
typedef enum tq_layout {
    TQ_LAYOUT_TURBO2, /* half norm; bits LSB-first                          */
    TQ_LAYOUT_TURBO3, /* half norm; lo2 plane; hi1 plane                    */
    TQ_LAYOUT_TURBO4, /* half norm; half rnorm (0); nibbles                 */
    TQ_LAYOUT_TQ,     /* half norm; bits LSB-first                          */
    TQ_LAYOUT_W3,     /* half d0; half d1; 4 x 24-bit groups of 8 indices   */
    TQ_LAYOUT_W4,     /* half d0; half d1; nibbles                          */
    TQ_LAYOUT_ANGLE,  /* half norm; angle bits; radius bits (TURBOANGLE.md)  */
    TQ_LAYOUT_PROD    /* half norm; half |e|; MSE bits; sketch bits         */
} tq_layout;

/* ---- the fork's revisions (lib/fork_revisions.c) */
/* Element types stop below this: TQ_DT_COUNT, then three a revision. */
#define TQ_DT_LIMIT (TQ_DT_COUNT + 3 * TQ_FORK_MAX_REVISIONS)
/* Revision rev's turbo{bits} block (bits 2..4): its codec is named "turbo{bits}" for the first
 * row's blocks, "turbo{bits}-FIRST" after the first row that writes it (first: NULL for the
 * first row's).  rev must be a row; no formatting: element conversions ask it a row at a time. */
typedef struct tq_fork_block_info {
    tq_layout layout;
    uint32_t bytes;
    const tq_codebook *book;
    const char *first;
} tq_fork_block_info;
void tq_fork_block(uint32_t rev, uint32_t bits, tq_fork_block_info *out);

/* Everything a kernel needs, resolved once at tq_codec_new. */
typedef struct tq_block_params {
    uint32_t g;
    uint32_t bits;
    uint32_t norm_correction;
    const float *s1, *s2; /* g signs each, +-1.0f                          */
    float scale;          /* 1/sqrt(g) as float                            */
    const tq_codebook *cb;
    /* The codebook again, padded to a whole number of SIMD registers: the
     * vector kernels look entries up with register permutes. */
    float cen[256] __attribute__((aligned(64)));
    float thr[256] __attribute__((aligned(64)));
} tq_block_params;

struct tq_codec {
    tq_codec_desc desc;
    tq_layout layout;
    size_t block_values;
    size_t block_bytes;
    tq_weight_search wsearch;
    tq_block_params kv;
    float *signs; /* owned storage for s1|s2 (KV) or w32 (weights) */
    float *extra; /* ANGLE: radius centroids then thresholds;
                     PROD: the g x g sketch matrix             */
    char name[48];
};

/* Kernel entry points: blocks [0, nb) of one contiguous span. */
typedef void (*tq_kv_encode_fn)(const tq_codec *c, const float *x, size_t nb, uint8_t *out);
typedef void (*tq_kv_decode_fn)(const tq_codec *c, const uint8_t *in, size_t nb, float *y,
                                int rotated);
typedef void (*tq_w_encode_fn)(const tq_codec *c, const float *x, size_t nb, uint8_t *out);
typedef void (*tq_w_decode_fn)(const tq_codec *c, const uint8_t *in, size_t nb, float *y);

/* A device backend takes a call's blocks at once and may fail (err gets a
 * one-line reason); 0 on success. */
typedef int (*tq_dev_encode_fn)(const tq_codec *c, const float *x, size_t nb, uint8_t *out,
                                char *err, size_t errlen);
typedef int (*tq_dev_decode_fn)(const tq_codec *c, const uint8_t *in, size_t nb, float *y,
                                int rotated, char *err, size_t errlen);

/* The backend table: one entry per SIMD level and one for CUDA.  A NULL
 * entry is an operation the backend cannot do: the call fails through the
 * context instead of running elsewhere. */
typedef struct tq_kernels {
    const char *name;
    tq_kv_encode_fn kv_encode; /* CPU levels: blocks of one span, on the calling thread */
    tq_kv_decode_fn kv_decode;
    tq_w_encode_fn w_encode;
    tq_w_decode_fn w_decode;
    tq_dev_encode_fn dev_kv_encode; /* device backends: KV codecs */
    tq_dev_decode_fn dev_kv_decode;
} tq_kernels;

const tq_kernels *tq_kernels_for(tq_simd level);
/* The table entry a context selects: its backend, and on the CPU its SIMD level. */
const tq_kernels *tq_kernels_of(const tq_ctx *ctx);
extern const tq_kernels tq_kernels_cuda;
/* TQ_OK on the CPU backend; else an UNSUPPORTED error naming `what`, for
 * operations only the CPU implements. */
tq_status tq_require_cpu(tq_ctx *ctx, const char *what);
extern const tq_kernels tq_kernels_scalar;
extern const tq_kernels tq_kernels_avx2;
extern const tq_kernels tq_kernels_avx512;

/* Block (de)serialisation shared by every kernel: indices one byte each. */
void tq_block_store(const tq_codec *c, const uint8_t *idx, uint16_t h0, uint16_t h1, uint8_t *out);
void tq_block_load(const tq_codec *c, const uint8_t *in, uint8_t *idx, uint16_t *h0, uint16_t *h1);

/* ---- K-quants and IQ4 (lib/kquants.c): nb whole blocks of t; -1 if t is
 * not one of them */
int tq_kquant_dequantize(tq_dtype t, const uint8_t *src, size_t nb, float *y);
/* q4_K, q5_K, q6_K (lib/kquants_encode.c): nb superblocks; qw NULL is ggml's
 * reference encoder, else the 256 * nb importances of these columns. */
int tq_kquant_quantize(tq_dtype t, const float *x, size_t nb, const float *qw, uint8_t *out);
/* q8_0, q4_0, q4_1, q5_0, q5_1 (lib/legacy_quants.c): n values; qw NULL is
 * the reference encoder, else x is one whole row and qw its n importances. */
int tq_legacy_quantize(tq_dtype t, const float *x, size_t n, const float *qw, uint8_t *out);

/* ---- TurboAngle (lib/turboangle.c) and TurboQuant-prod
 * (lib/turboquant_prod.c): CPU code for whole spans of blocks.  qr in the
 * scores is the query after the codec's forward rotation. */
int tq_angle_radius_codebook(uint32_t g, uint32_t bits, float *cen, float *thr);
void tq_angle_encode(const tq_codec *c, const float *x, size_t nb, uint8_t *out);
/* one block into y, still in the rotated domain (codec.c undoes the RHT) */
void tq_angle_decode_block(const tq_codec *c, const uint8_t *in, float *y);
tq_status tq_angle_scores(const tq_codec *c, const float *qr, const uint8_t *blocks, size_t n_keys,
                          float *out);
int tq_prod_sketch(uint32_t g, uint64_t seed, float *S);
void tq_prod_encode(const tq_codec *c, const float *x, size_t nb, uint8_t *out);
void tq_prod_decode_block(const tq_codec *c, const uint8_t *in, float *y);
tq_status tq_prod_scores(const tq_codec *c, const float *qr, const uint8_t *blocks, size_t n_keys,
                         float *out);

/* The fork's scale grid for TQ3_1S/TQ4_1S. */
#define TQ_WGRID_N 9
extern const float tq_wgrid[TQ_WGRID_N];
#define TQ_WREFINE_ROUNDS 6

/* ---- half precision rows with F16C (lib/half_f16c.c) */
void tq_fp16_to_fp32_row_f16c(const uint16_t *x, float *y, size_t n);
int tq_have_f16c_kernel(void);
void tq_fp16_to_fp32_bulk(const uint16_t *x, float *y, size_t n);
void tq_fp32_to_fp16_row_f16c(const float *x, uint16_t *y, size_t n);
/* F16C when present; NaN payloads may differ from tq_fp32_to_fp16 (quieted). */
void tq_fp32_to_fp16_bulk(const float *x, uint16_t *y, size_t n);

/* ---- CUDA backend (kernels/, only when built with nvcc) */
int tq_cuda_encode(const tq_codec *c, const float *x, size_t nb, uint8_t *out, char *err,
                   size_t errlen);
int tq_cuda_decode(const tq_codec *c, const uint8_t *in, size_t nb, float *y, int rotated,
                   char *err, size_t errlen);

#endif
