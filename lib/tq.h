/*
 * tq.h - public interface of libtq, the TurboQuant codec library.
 *
 * libtq knows numbers, not files: randomized Hadamard rotations, Lloyd-Max
 * codebooks, bit packing and the block codecs (the TurboQuant+ fork's turbo2/3/4
 * KV blocks and TQ3_1S/TQ4_1S weight blocks, plus tq's own generic KV block).
 * It never prints and never exits.
 *
 * Conventions
 *   - Every fallible call takes a tq_ctx and returns a tq_status. On failure the
 *     context keeps a one-line message (tq_ctx_error) naming what was wrong;
 *     the caller decides how to report it.  Passing NULL where a pointer is
 *     required is a programmer error and asserts.
 *   - All multi-byte block fields are little-endian; fp16 is IEEE binary16.
 *   - Output is a pure function of the input and the codec configuration: the
 *     thread count, the SIMD level and the backend never change a byte.
 */
#ifndef TQ_H
#define TQ_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What libtq.so exports: the functions declared here and nothing else (libtq is built with
 * -fvisibility=hidden; tq and the unit tests link libtq.a for the internals). */
#if defined(__GNUC__)
#define TQ_API __attribute__((visibility("default")))
#else
#define TQ_API
#endif

#define TQ_VERSION_MAJOR  0
#define TQ_VERSION_MINOR  2
#define TQ_VERSION_PATCH  0
#define TQ_VERSION_STRING "0.2.0"

TQ_API const char *tq_version(void);

/* ---------------------------------------------------------------- errors */

typedef enum tq_status {
    TQ_OK = 0,
    TQ_ERR_ARG = 1,         /* an argument is out of range or inconsistent  */
    TQ_ERR_NOMEM = 2,       /* an allocation failed                         */
    TQ_ERR_UNSUPPORTED = 3, /* valid request that this build cannot serve   */
    TQ_ERR_FORMAT = 4,      /* input bytes do not follow the format         */
    TQ_ERR_IO = 5,          /* the operating system refused a file action   */
    TQ_ERR_CORRUPT = 6      /* a checksum or invariant does not hold        */
} tq_status;

/* A context carries the last error message and the execution settings
 * (threads, SIMD level, backend).  One context per thread of the caller. */
typedef struct tq_ctx tq_ctx;

TQ_API tq_ctx *tq_ctx_new(void); /* NULL only when out of memory */
TQ_API void tq_ctx_free(tq_ctx *ctx);
TQ_API const char *tq_ctx_error(const tq_ctx *ctx); /* "" when no error recorded */
TQ_API tq_status tq_ctx_status(const tq_ctx *ctx);
TQ_API void tq_ctx_clear_error(tq_ctx *ctx);
/* Records an error as the library does (for callers layering their own
 * steps on a context, like archive_set_error); returns st. */
TQ_API tq_status tq_ctx_set_error(tq_ctx *ctx, tq_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
TQ_API const char *tq_status_name(tq_status st);
/* dst takes src's status and message: a worker context's failure reported
 * on the caller's (parallel loops keep the first failing item's). */
TQ_API void tq_ctx_copy_error(tq_ctx *dst, const tq_ctx *src);
/* For parallel loops: item failed on worker (a tq_ctx_clone of dst, or NULL
 * where the clone failed); dst keeps the failure of the lowest item, so the
 * message is the same whatever the thread count.  *first starts at SIZE_MAX
 * and is the failed item after the loop.  Thread-safe. */
TQ_API void tq_ctx_keep_first(tq_ctx *dst, size_t *first, size_t item, const tq_ctx *worker);
/* A new context with ctx's SIMD level and backend, one thread and no error,
 * for the calls a worker thread makes (a context is not shared between
 * threads); NULL only when out of memory. */
TQ_API tq_ctx *tq_ctx_clone(const tq_ctx *ctx);

/* Threads used by the row-parallel entry points; 0 = all cores (default). */
TQ_API void tq_ctx_set_threads(tq_ctx *ctx, int n_threads);
TQ_API int tq_ctx_threads(const tq_ctx *ctx);

/* SIMD level.  AUTO picks the best the CPU supports at run time; a level the
 * CPU lacks is refused.  SCALAR is the reference every other level matches. */
typedef enum tq_simd {
    TQ_SIMD_AUTO = 0,
    TQ_SIMD_SCALAR = 1,
    TQ_SIMD_AVX2 = 2,
    TQ_SIMD_AVX512 = 3
} tq_simd;

TQ_API tq_status tq_ctx_set_simd(tq_ctx *ctx, tq_simd level);
TQ_API tq_simd tq_ctx_simd(const tq_ctx *ctx); /* the level in effect */
TQ_API const char *tq_simd_name(tq_simd level);
TQ_API tq_simd tq_simd_best(void); /* best level this CPU has */

/* Backend: CPU always; CUDA when the library was built with nvcc and a GPU is
 * visible at run time.  AUTO stays on the CPU: moving data to a GPU pays only
 * for large batches, so the caller opts in. */
typedef enum tq_backend { TQ_BACKEND_CPU = 0, TQ_BACKEND_CUDA = 1 } tq_backend;
TQ_API tq_status tq_ctx_set_backend(tq_ctx *ctx, tq_backend backend);
TQ_API tq_backend tq_ctx_backend(const tq_ctx *ctx);
TQ_API int tq_cuda_built(void);   /* 1 if compiled with CUDA support            */
TQ_API int tq_cuda_devices(void); /* GPUs visible now (0 without CUDA or a GPU) */

/* 1 if v is a power of two (rotation groups are). */
TQ_API int tq_is_pow2(uint32_t v);

/* ------------------------------------------------------- half precision */

TQ_API uint16_t tq_fp32_to_fp16(float f); /* round to nearest even, NaN stays NaN */
TQ_API float tq_fp16_to_fp32(uint16_t h);
TQ_API uint16_t tq_fp32_to_bf16(float f); /* round to nearest even, NaN quieted   */
TQ_API float tq_bf16_to_fp32(uint16_t h);
TQ_API void tq_fp32_to_fp16_row(const float *x, uint16_t *y, size_t n);
TQ_API void tq_fp16_to_fp32_row(const uint16_t *x, float *y, size_t n);
TQ_API void tq_fp32_to_bf16_row(const float *x, uint16_t *y, size_t n);
TQ_API void tq_bf16_to_fp32_row(const uint16_t *x, float *y, size_t n);

/* ----------------------------------------- randomized Hadamard transform */

/* y = D(s2) * H * D(s1) * x / sqrt(g), in place, g a power of two in
 * [TQ_RHT_MIN, TQ_RHT_MAX].  H is the unnormalized Sylvester Walsh-Hadamard
 * matrix applied with the fork's butterfly order.  The sign vectors come from
 * tq_signs_kv(); the inverse applies the same factors in reverse order. */
#define TQ_RHT_MIN 8
#define TQ_RHT_MAX 1024

/* Sign vectors for a group of g values, as +1.0f / -1.0f.  seed 0 with
 * g = 128 (or 64) gives the fork's signs1/signs2 (their first 64 entries for
 * g = 64); every other (g, seed) comes from the documented generator in
 * lib/SIGNS.md.  s1 and s2 must hold g floats each. */
#define TQ_SEED_FORK 0u
TQ_API tq_status tq_signs_kv(tq_ctx *ctx, uint32_t g, uint64_t seed, float *s1, float *s2);
/* The fork's 32-entry weight signs (TQ3_1S/TQ4_1S), as +1.0f / -1.0f. */
TQ_API void tq_signs_weight32(float s[32]);

TQ_API tq_status tq_rht_forward(tq_ctx *ctx, uint32_t g, const float *s1, const float *s2,
                                float *x);
TQ_API tq_status tq_rht_inverse(tq_ctx *ctx, uint32_t g, const float *s1, const float *s2,
                                float *x);
/* x = H x / sqrt(n) in every block of n of count values (the RHT without
 * signs; its own inverse): llama.cpp's attention rotation of quantized KV
 * caches.  n a power of two in [TQ_RHT_MIN, TQ_RHT_MAX]. */
TQ_API tq_status tq_hadamard_blocks(tq_ctx *ctx, uint32_t n, float *x, size_t count);

/* ------------------------------------------------------------ codebooks */

typedef enum tq_codebook_kind {
    TQ_CB_TURBO2 = 1, /* fork KV tables, unit-norm rotated coordinates   */
    TQ_CB_TURBO3 = 2,
    TQ_CB_TURBO4 = 3,
    TQ_CB_TQ3W = 4, /* fork weight tables, in units of the half scale  */
    TQ_CB_TQ4W = 5,
    TQ_CB_EXACT = 6  /* Lloyd-Max for one coordinate of a random unit
                        vector in R^g, computed (not typed in)          */
} tq_codebook_kind;
/* TQ_CB_TURBO2..4 are the first fork revision's tables; every revision's
 * are its codec's (tq_codec_desc.fork_rev). */

/* A codebook: 2^bits centroids ascending and 2^bits - 1 decision thresholds
 * (a value v gets index #{k : v >= thresholds[k]}).  Returned pointers stay
 * valid for the life of the process. */
typedef struct tq_codebook {
    uint32_t bits;
    uint32_t size; /* 2^bits */
    const float *centroids;
    const float *thresholds;
    double mse; /* D_mse per unit vector (EXACT only), else 0 */
} tq_codebook;

/* For TQ_CB_EXACT: g a power of two in [8, 1024], bits 1..8.  Other kinds
 * ignore g and bits. */
TQ_API tq_status tq_codebook_get(tq_ctx *ctx, tq_codebook_kind kind, uint32_t g, uint32_t bits,
                                 tq_codebook *out);

/* ------------------------------------------------------------ bit packing */

/* Indices of 1..8 bits, least significant bit first: index j occupies bits
 * [j*bits, j*bits + bits) of the byte string read as one little-endian
 * number.  n*bits must be a multiple of 8. */
TQ_API size_t tq_packed_bytes(size_t n, uint32_t bits);
TQ_API void tq_pack_bits(const uint8_t *idx, size_t n, uint32_t bits, uint8_t *out);
TQ_API void tq_unpack_bits(const uint8_t *in, size_t n, uint32_t bits, uint8_t *idx);
/* The fork's turbo3 layout: low two bits packed 4 per byte in lo[n/4], the
 * third bit packed 8 per byte in hi[n/8]. n a multiple of 8. */
TQ_API void tq_pack_turbo3(const uint8_t *idx, size_t n, uint8_t *lo, uint8_t *hi);
TQ_API void tq_unpack_turbo3(const uint8_t *lo, const uint8_t *hi, size_t n, uint8_t *idx);

/* The tq generic block stream (lib/TQ_BLOCK.md, "Planes") of n_blocks
 * blocks of g values at b bits (g a multiple of 8, b 2..8), rearranged for
 * a byte-wise entropy coder and back: all norms, then every index's sign
 * (idx >= 2^(b-1)), then its magnitude (b-1 bits, 0 nearest zero), each an
 * LSB-first stream.  The same bytes in another order: a Lloyd-Max
 * codebook's indices are far from uniform (2.82 of 3 bits), and magnitudes
 * of whole fields per byte let zstd's Huffman stage take what 3-bit fields
 * straddling bytes hide. */
TQ_API void tq_blocks_to_planes(uint32_t g, uint32_t b, const uint8_t *blocks, size_t n_blocks,
                                uint8_t *planes);
TQ_API void tq_planes_to_blocks(uint32_t g, uint32_t b, const uint8_t *planes, size_t n_blocks,
                                uint8_t *blocks);

/* ------------------------------------------------------------ block codecs */

typedef enum tq_codec_kind {
    TQ_CODEC_TURBO2 = 1, /* fork block_turbo2_0: 128 values, 34 bytes     */
    TQ_CODEC_TURBO3 = 2, /* fork block_turbo3_0: 128 values, 50 bytes     */
    TQ_CODEC_TURBO4 = 3, /* fork block_turbo4_0: 128 values, 68 bytes     */
    TQ_CODEC_TQ = 4,     /* tq generic KV block, see lib/TQ_BLOCK.md      */
    TQ_CODEC_TQ3_1S = 5, /* fork weight block: 32 values, 16 bytes        */
    TQ_CODEC_TQ4_1S = 6, /* fork weight block: 32 values, 20 bytes        */
    TQ_CODEC_ANGLE = 7,  /* TurboAngle: polar pairs after the rotation,
                            lib/TURBOANGLE.md                             */
    TQ_CODEC_PROD = 8    /* TurboQuant-prod: (b-1)-bit MSE block plus a
                            1-bit QJL sketch of the residual, unbiased
                            inner products, lib/TQ_PROD.md                */
} tq_codec_kind;

/* The codec descriptor: everything needed to decode a block stream again.
 * Fields a kind does not use must be zero (the fork kinds fix group, bits,
 * norm correction and signs). */
typedef struct tq_codec_desc {
    tq_codec_kind kind;
    uint32_t group;           /* TQ: power of two in [8, 512]               */
    uint32_t bits;            /* TQ: 1..8                                   */
    uint32_t norm_correction; /* TQ: 1 = store n/|c| so the decoded vector  */
                              /*     keeps the input norm; 0 = store n      */
    uint64_t seed;            /* TQ: sign seed, TQ_SEED_FORK for the fork's */
                              /* ANGLE: group, bits = angle bits (2^bits    */
                              /* bins), norm_correction, seed as TQ's;      */
    uint32_t radius_bits;     /* ANGLE: bits per pair radius (0: one radius */
                              /* per group, implied by the norm)            */
                              /* PROD: group, bits = b in 2..8 (b-1 MSE bits */
                              /* + 1 sketch bit), seed; the rest 0          */
    uint32_t uniform;         /* TQ: 1 = uniform cells (bits 2..8) with the */
                              /* distortion of the Lloyd-Max codebook of    */
                              /* bits - 1, for an entropy coder to follow   */
    uint32_t fork_rev;        /* TURBO2..4: the fork revision whose blocks  */
                              /* (tq_fork_revision_at; 0: the first row)    */
} tq_codec_desc;


/* Weight encoders: FORK reproduces the fork's grid search bit for bit; BEST
 * (the default) runs the same search, re-picks each index against the stored
 * fp16 scale, and also tries a second start per half-block (the grid value
 * best for that half alone), keeping it only where its error is lower: its
 * squared error is never above the fork's, block by block. */
typedef enum tq_weight_search { TQ_WSEARCH_BEST = 0, TQ_WSEARCH_FORK = 1 } tq_weight_search;

typedef struct tq_codec tq_codec;

TQ_API tq_status tq_codec_new(tq_ctx *ctx, const tq_codec_desc *desc, tq_codec **out);
/* The values and bytes of a block of desc's codec, checked as tq_codec_new checks it, without
 * building its tables (for readers that size chunks). */
TQ_API tq_status tq_codec_desc_sizes(tq_ctx *ctx, const tq_codec_desc *desc, size_t *block_values,
                                     size_t *block_bytes);
TQ_API void tq_codec_free(tq_codec *codec);
TQ_API const tq_codec_desc *tq_codec_get_desc(const tq_codec *codec);
TQ_API size_t tq_codec_block_values(const tq_codec *codec);
TQ_API size_t tq_codec_block_bytes(const tq_codec *codec);
TQ_API const char *tq_codec_name(const tq_codec *codec); /* "turbo3", "tq(g=64,b=4,nc)" */
TQ_API tq_status tq_codec_set_weight_search(tq_ctx *ctx, tq_codec *codec, tq_weight_search s);

/* Row-parallel entry points.  n values (a multiple of the block size) become
 * n / block_values consecutive blocks.  Work is split over blocks with OpenMP;
 * the bytes are the same for any thread count and SIMD level. */
TQ_API tq_status tq_encode(tq_ctx *ctx, const tq_codec *codec, const float *x, size_t n,
                           void *blocks);
TQ_API tq_status tq_decode(tq_ctx *ctx, const tq_codec *codec, const void *blocks, size_t n,
                           float *y);
/* TQ3_1S/TQ4_1S with importance data (llama.cpp's imatrix: the mean squared
 * activation of each input column).  x holds n_rows rows of row_len values
 * (a multiple of 32); importance has row_len finite values >= 0 (NULL: plain
 * tq_encode).  Each block starts from the codec's own search and is improved
 * for the importance-weighted squared error in the weights' own basis; it
 * keeps the plain result unless that error falls. */
TQ_API tq_status tq_encode_weighted(tq_ctx *ctx, const tq_codec *codec, const float *x,
                                    size_t n_rows, size_t row_len, const float *importance,
                                    void *blocks);
/* KV codecs only: the values as the fork's to_float returns them, still in the
 * rotated domain (centroid * stored norm, no inverse rotation). */
TQ_API tq_status tq_decode_rotated(tq_ctx *ctx, const tq_codec *codec, const void *blocks, size_t n,
                                   float *y);
/* Attention scores in the compressed domain: out[i] = <q, decode(block i)>
 * for n_keys consecutive blocks of a KV codec (turbo*, tq, angle, prod), q
 * holding one block's worth of values.  The query is rotated once; each key
 * then costs table lookups and one dot product, no inverse rotation.  Equal
 * to decode-then-dot up to float rounding. */
TQ_API tq_status tq_scores(tq_ctx *ctx, const tq_codec *codec, const float *q, const void *blocks,
                           size_t n_keys, float *out);

/* --------------------------------------------------- element data types */

/* The element encodings tq reads and writes in tensors, by name rather than
 * by a file's numeric type id (ids differ between ggml revisions and forks;
 * formats/ maps them).  Q* are ggml's reference block formats. */
typedef enum tq_dtype {
    TQ_DT_F32 = 0,
    TQ_DT_F16,
    TQ_DT_BF16,
    TQ_DT_Q4_0,
    TQ_DT_Q4_1,
    TQ_DT_Q5_0,
    TQ_DT_Q5_1,
    TQ_DT_Q8_0,
    TQ_DT_TQ3_1S,
    TQ_DT_TQ4_1S,
    TQ_DT_TURBO2,
    TQ_DT_TURBO3,
    TQ_DT_TURBO4,
    TQ_DT_Q2_K, /* ggml's K-quant superblocks of 256 values */
    TQ_DT_Q3_K,
    TQ_DT_Q4_K,
    TQ_DT_Q5_K,
    TQ_DT_Q6_K,
    TQ_DT_IQ4_NL, /* ggml's non-linear 4-bit blocks (decode only) */
    TQ_DT_IQ4_XS,
    TQ_DT_COUNT /* from here: the later fork revisions' blocks (tq_fork_dtype) */
} tq_dtype;

TQ_API const char *tq_dtype_name(tq_dtype t); /* "f32", "q8_0", "tq4_1s", ... */
TQ_API size_t tq_dtype_block_values(tq_dtype t);
TQ_API size_t tq_dtype_block_bytes(tq_dtype t);

/* ------------------------------------------------------------ fork revisions */

/* The TurboQuant+ fork's revisions, a row each (lib/fork_revisions.c,
 * lib/TURBO_REVISIONS.md): the ids a build of it gives its types and the
 * KV blocks it writes under them.  A revision is a number, its row: rows
 * are only ever added, at the end.  The first row is what a file that
 * names no revision means. */
#define TQ_FORK_MAX_REVISIONS 32
#define TQ_FORK_NEWEST 1u /* the fork as its users run it now */
typedef struct tq_fork_revision {
    const char *name;  /* a commit of the fork (or of a branch), or its PR   */
    int last_upstream; /* the upstream ggml type ids it keeps: 0..this       */
    int turbo2, turbo3, turbo4, tq3_1s, tq4_1s; /* its ids (-1: none)        */
    uint32_t flags;    /* TQ_FORK_NEWEST                                    */
} tq_fork_revision;
TQ_API uint32_t tq_fork_revision_count(void);
TQ_API const tq_fork_revision *tq_fork_revision_at(uint32_t rev); /* NULL past the last */
/* The element type of turbo{bits} (2..4) as revision rev writes it:
 * TQ_DT_TURBO2..4 for the first row's blocks, a number from TQ_DT_COUNT on
 * for later ones (revisions writing the same block share it); TQ_DT_COUNT
 * where there is no such type. */
TQ_API tq_dtype tq_fork_dtype(uint32_t rev, uint32_t bits);
/* Whether t is a fork KV type of any revision: the first revision writing
 * its block and its bits. */
TQ_API int tq_fork_dtype_of(tq_dtype t, uint32_t *rev, uint32_t *bits);

/* n values (a multiple of the block size) to float32.  turbo* come back in
 * the original (unrotated) basis.  Runs on the calling thread. */
TQ_API tq_status tq_dequantize(tq_ctx *ctx, tq_dtype t, const void *src, size_t n, float *dst);
/* float32 to n values of t: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1,
 * q4_K, q5_K and q6_K bit-exact with ggml's reference quantizers (what
 * llama-quantize writes without an imatrix); tq3_1s, tq4_1s and turbo*
 * through the codecs.  q2_K, q3_K and the IQ4 types decode only. */
TQ_API tq_status tq_quantize(tq_ctx *ctx, tq_dtype t, const float *src, size_t n, void *dst);
/* The same with importance data, as llama-quantize does with an imatrix:
 * n_rows rows of row_len values, importance[row_len] (finite, >= 0) the
 * weight of each column.  q4_0, q4_1, q5_0, q5_1 and q4_K..q6_K run ggml's
 * importance-weighted quantizers bit for bit; types ggml does not weight
 * (float, q8_0) ignore it; importance NULL is tq_quantize.  For the
 * TurboQuant weight blocks use tq_encode_weighted. */
TQ_API tq_status tq_quantize_weighted(tq_ctx *ctx, tq_dtype t, const float *x, size_t n_rows,
                                      size_t row_len, const float *importance, void *dst);

/* ------------------------------------------------------------ InnerQ */

/* Per-channel equalization: x holds n values in groups of dim channels;
 * channel j of every group is multiplied by scales[j] (divide = 0, before
 * coding) or divided by it (divide = 1, after decoding).  n a multiple of
 * dim; scales finite and positive.  Division, not multiplication by the
 * reciprocal, so that scales of powers of two round-trip exactly. */
TQ_API tq_status tq_innerq_apply(tq_ctx *ctx, float *x, size_t n, const float *scales, uint32_t dim,
                                 int divide);

/* How scales are derived from per-channel mean squares (calibrate-innerq):
 * QK: s_j = (E[q_j^2] / E[k_j^2])^(strength/2), which minimises the logit
 *     error of a quantized K scaled by s (strength 0.5: the fourth root);
 * KV: s_j = (1 / E[k_j^2])^(strength/2), K (or V) energy alone;
 * FORK: the TurboQuant+ fork's rule: rms_j = sqrt(E[k_j^2]), ratio_j =
 *     mean(rms) / rms_j (1 where rms_j <= 1e-10), s_j = clamp(ratio_j^strength,
 *     0.5, 2), and all 1 when every ratio lies in (1/1.2, 1.2) (the fork's
 *     auto-disable); computed in float as the fork does, no pairing, no
 *     rescaling. */
typedef enum tq_innerq_method {
    TQ_INNERQ_QK = 0,
    TQ_INNERQ_KV = 1,
    TQ_INNERQ_FORK = 2
} tq_innerq_method;
/* RoPE's pairs, which must share a scale for folding to commute with RoPE:
 * adjacent (2i, 2i+1) as llama.cpp's normal RoPE, or halves (i, i + dim/2)
 * as NeoX; the first rot channels only (partial RoPE; 0: all). */
typedef enum tq_rope_pairs {
    TQ_PAIRS_NONE = 0,
    TQ_PAIRS_ADJACENT = 1,
    TQ_PAIRS_HALVES = 2
} tq_rope_pairs;

/* dim scales from mean squares ek2 (and eq2 for QK; NULL otherwise).  QK and
 * KV: pair members' mean squares are averaged first (so pairs share a
 * scale), each scale is clamped to [lo, hi] (0: no bound), then all are
 * divided by their geometric mean so that K keeps its overall size.
 * Channels with no energy get 1 before that division. */
TQ_API tq_status tq_innerq_scales(tq_ctx *ctx, tq_innerq_method method, const double *ek2,
                                  const double *eq2, uint32_t dim, tq_rope_pairs pairs,
                                  uint32_t rot, double strength, double lo, double hi,
                                  float *scales);

/* ------------------------------------------------------------ RoPE */

/* RoPE as llama.cpp applies it without YaRN: pair i of the first n_rot
 * channels of every head turns by pos * freq_scale * freq_base^(-2i/n_rot).
 * tq uses it to predict K from its pre-RoPE mean (K offsets in snapshots):
 * the prediction is removed before coding and added back after decoding by
 * this same function, so parameters that differ from the model's cost
 * quality only, never exactness. */
typedef struct tq_rope {
    uint32_t head_dim, n_rot; /* n_rot even, <= head_dim: partial RoPE leaves the rest */
    tq_rope_pairs pairs;      /* ADJACENT or HALVES */
    float freq_base, freq_scale;
} tq_rope;

/* TQ_OK if r describes a rotation of rows of width values, else why not. */
TQ_API tq_status tq_rope_check(tq_ctx *ctx, const tq_rope *r, uint64_t width);
/* x (rows of width values, whole heads) = R(pos[r])^T x: back to before RoPE. */
TQ_API tq_status tq_rope_unrotate(tq_ctx *ctx, const tq_rope *r, float *x, size_t rows,
                                  uint64_t width, const int32_t *pos);
/* x = R(pos[r]) x: RoPE as the model applies it (undoes tq_rope_unrotate). */
TQ_API tq_status tq_rope_rotate(tq_ctx *ctx, const tq_rope *r, float *x, size_t rows,
                                uint64_t width, const int32_t *pos);
/* x[r] += sign * R(pos[r]) b for every row: b (width values) as each row's
 * position turns it. */
TQ_API tq_status tq_rope_add(tq_ctx *ctx, const tq_rope *r, const float *b, float *x, size_t rows,
                             uint64_t width, const int32_t *pos, float sign);

/* ------------------------------------------------------------ rotations */

/* Seeded n x n orthogonal matrices, for folding rotations into weights: a
 * randomized Hadamard transform when n is a power of two, else its Kronecker
 * product with a seeded random orthogonal k x k factor (n = 2^a k, k <= 512). */
typedef struct tq_rotation tq_rotation;

TQ_API tq_status tq_rotation_new(tq_ctx *ctx, uint32_t n, uint64_t seed, tq_rotation **out);
/* A seeded random diagonal of +1/-1 (kind "signs(n)"): orthogonal and exact
 * in floating point, so a model rotated with it computes bit for bit what
 * the original computes where no norm gain has to be folded; for checking
 * that a pipeline transforms every tensor consistently. */
TQ_API tq_status tq_rotation_new_signs(tq_ctx *ctx, uint32_t n, uint64_t seed, tq_rotation **out);
TQ_API void tq_rotation_free(tq_rotation *r);
TQ_API uint32_t tq_rotation_size(const tq_rotation *r);
/* "hadamard(4096)", "hadamard(1024) x orthogonal(3)" */
TQ_API const char *tq_rotation_kind(const tq_rotation *r);
/* x <- R x (transpose: R' x) for `lanes` vectors stored interleaved: element i
 * of vector l at x[i * lanes + l].  lanes = 1 rotates one contiguous vector;
 * lanes = c rotates the columns of an n x c row-major matrix. */
TQ_API tq_status tq_rotation_apply(tq_ctx *ctx, const tq_rotation *r, float *x, size_t lanes,
                                   int transpose);
/* `rows` contiguous vectors one after another (the rows of a rows x n
 * matrix): the same as one call per row, faster. */
TQ_API tq_status tq_rotation_apply_rows(tq_ctx *ctx, const tq_rotation *r, float *x, size_t rows,
                                        int transpose);
/* The same with element i of vector l at x[i * stride + l] (lanes <= stride):
 * a block of columns of an n x stride matrix, so column blocks can be rotated
 * in parallel. */
TQ_API tq_status tq_rotation_apply_strided(tq_ctx *ctx, const tq_rotation *r, float *x,
                                           size_t lanes, size_t stride, int transpose);

/* ------------------------------------------------------------ statistics */

/* Running raw moments of a sample (sums in double), for min / max / RMS /
 * kurtosis reports.  Accumulate chunks in a fixed order to get the same
 * result for any thread count. */
typedef struct tq_moments {
    uint64_t n;
    double s1, s2, s3, s4;
    double min, max;
} tq_moments;

TQ_API void tq_moments_init(tq_moments *m);
TQ_API void tq_moments_add(tq_moments *m, const float *x, size_t n);
TQ_API void tq_moments_merge(tq_moments *into, const tq_moments *from);
/* mean, RMS, Pearson kurtosis (3 for a Gaussian; 0 when the variance is 0) */
TQ_API void tq_moments_summary(const tq_moments *m, double *mean, double *rms, double *kurtosis);
/* how many |x[i]| > threshold */
TQ_API uint64_t tq_count_beyond(const float *x, size_t n, float threshold);

/* ------------------------------------------------------------ quality of decoded K/V */

/* One attention head's sample: n keys and values of d values (k[n][d], v[n][d]) and m
 * queries q[m][d]. */
typedef struct tq_attn_head {
    uint32_t d, n, m;
    uint32_t layer, n_layers; /* where the head came from (reports only) */
    const float *k, *v, *q;
} tq_attn_head;

/* What decoded keys and values do to the head's attention, in double precision. */
typedef struct tq_attn_error {
    double kl;      /* mean over queries of KL(softmax(qK/sqrt d) || softmax(qKd/sqrt d)) */
    double out_cos; /* mean cosine of p V and pd Vd */
    double topk;    /* mean |top-k(p) & top-k(pd)| / k */
    double skipped; /* tau > 0 (sparse V): the share of value rows whose decoded weight < tau */
} tq_attn_error;

/* The head's attention with kd[n][d], vd[n][d] in place of its K and V; k for the top-k
 * overlap; tau > 0 skips value rows whose decoded weight is below it. */
TQ_API tq_status tq_attention_error(tq_ctx *ctx, const tq_attn_head *h, const float *kd,
                                    const float *vd, int k, double tau, tq_attn_error *out);
/* Adds n vectors of d values' reconstruction: the summed squared error and squares, the
 * largest |error|, the summed per-vector cosine of x and y. */
TQ_API void tq_recon_error(const float *x, const float *y, size_t n, uint32_t d, double *se,
                           double *sx, double *max_err, double *cos_sum);
/* KL of the histogram of pair angles atan2(y[2i+1], y[2i]) over `bins` equal bins against
 * the uniform law (NaN for no pairs). */
TQ_API double tq_angle_kl(const float *y, size_t n_pairs, int bins);

/* ------------------------------------------------- transform coding */

/* The building blocks of transform coding a snapshot (issue 22): the
 * eigenbasis of a covariance (a KLT) and the bits per component by reverse
 * water-filling.  Deterministic: the same bytes in, the same numbers out,
 * whatever the thread count or SIMD level. */

/* Eigen-decomposition of the symmetric d x d matrix a (row-major, read
 * only; Householder reduction and QL steps): eigval[d] descending, eigvec[d][d] with
 * eigenvector k in row k (orthonormal rows: y = V x decorrelates x).  d <=
 * 4096; TQ_ERR_ARG for a matrix that is not symmetric or not finite.
 * eigvec NULL: the values alone (the reduction without its vectors, about
 * a third of the work; equal to the values with vectors to rounding, not to the bit). */
TQ_API tq_status tq_sym_eigen(tq_ctx *ctx, uint32_t d, const double *a, double *eigval,
                              double *eigvec);

/* Reverse water-filling for Gaussian components of variances var[n]: the
 * water level theta such that sum_i max(0, log2(var_i / theta) / 2) equals
 * n * bits_per_value; bits[i] that rate of component i (0 where var_i <=
 * theta: the component is not coded and decodes to its mean), distortion
 * min(var_i, theta) each.  Returns theta (0 when every variance is 0). */
TQ_API tq_status tq_waterfill(tq_ctx *ctx, uint32_t n, const double *var, double bits_per_value,
                              double *bits, double *theta);

/* Transform coding: vectors of d values (d % 8 == 0) projected on m
 * orthonormal basis rows, strongest component first, each coefficient
 * quantized with one uniform step (an index in -32767..32767); components
 * past m decode to 0.  The products are chains of fused multiply-adds in
 * one order at every SIMD level: the same bytes everywhere. */
typedef struct tq_klt {
    uint32_t d;         /* values per vector */
    uint32_t m;         /* coded components, 0..d */
    float step;         /* quantizer step, finite and > 0 */
    const float *basis; /* [m][d] */
} tq_klt;

/* idx[m][n] (component-major) = round(basis[c] . x[r] / step) for the n
 * vectors x + r * stride. */
TQ_API tq_status tq_klt_encode(tq_ctx *ctx, const tq_klt *k, const float *x, size_t n,
                               size_t stride, int16_t *idx);
/* x + r * stride = sum over c of idx[c][r] * step * basis[c]. */
TQ_API tq_status tq_klt_decode(tq_ctx *ctx, const tq_klt *k, const int16_t *idx, size_t n, float *x,
                               size_t stride);
/* y[n][m] = the coefficients of the n vectors x + r * stride on basis[m][d]
 * (m % 8 == 0), unquantized. */
TQ_API tq_status tq_klt_project(tq_ctx *ctx, const float *basis, uint32_t m, uint32_t d,
                                const float *x, size_t n, size_t stride, float *y);
/* cov[d][d] = the mean of x x^T over the n vectors x + r * stride (the
 * caller removes the mean first). */
TQ_API tq_status tq_covariance(tq_ctx *ctx, const float *x, size_t n, uint32_t d, size_t stride,
                               double *cov);
/* The step at which coefficients y[n][d] (a sample) quantize to indices of
 * bits per value on average (empirical entropy per component, summed), and
 * m = 1 + the last component that carries at least min_bits; rate: the
 * bits per value at that step. */
TQ_API tq_status tq_klt_rate_step(tq_ctx *ctx, const float *y, size_t n, uint32_t d, double bits,
                                  double min_bits, float *step, uint32_t *m, double *rate);
/* How many of d Gaussian components of variances var (any order) one
 * uniform step at bits per value codes with at least min_bits each, by the
 * high-rate law 0.5 log2(2 pi e var / step^2): an estimate of the m that
 * tq_klt_rate_step finds, from eigenvalues alone. */
TQ_API uint32_t tq_klt_gauss_components(const double *var, uint32_t d, double bits,
                                        double min_bits);
/* The bits per value one uniform step spends on d Gaussian components of variances var
 * (any order) to reach a mean squared error of mse per value, components that would carry
 * under min_bits dropped (their variance is their error); *m (may be NULL) the components
 * kept.  0 where mse is the whole variance or more. */
TQ_API double tq_klt_gauss_bits_at_error(const double *var, uint32_t d, double mse, double min_bits,
                                         uint32_t *m);
/* What tq's codec (TQ kind, group g, bits, uniform cells or Lloyd-Max) costs on a rotated
 * Gaussian group: *mse its squared error per unit of the group's squared norm, *index_bits the
 * entropy of one index (what an entropy coder after it can reach), norms not counted. */
TQ_API tq_status tq_codec_gauss_cost(tq_ctx *ctx, uint32_t g, uint32_t bits, int uniform,
                                     double *mse, double *index_bits);

/* ------------------------------------------------------------ entropy coding */

/* n byte symbols as one rANS stream with its own static model (lib/rans.c: the model, then
 * the coded bytes), into out (cap >= tq_rans_bound(n)); *len its length.  The same bytes on
 * any machine. */
TQ_API size_t tq_rans_bound(size_t n);
TQ_API tq_status tq_rans_encode(tq_ctx *ctx, const uint8_t *sym, size_t n, uint8_t *out, size_t cap,
                                size_t *len);
/* n symbols back from the stream at in (len bytes available); *used the stream's length.
 * TQ_ERR_CORRUPT where the model or the coded bytes are not a stream of n symbols. */
TQ_API tq_status tq_rans_decode(tq_ctx *ctx, const uint8_t *in, size_t len, uint8_t *sym, size_t n,
                                size_t *used);
/* The most streams the _many calls code at once. */
#define TQ_RANS_LANES 32
/* k streams (1..TQ_RANS_LANES) of n symbols each, sym[k][n], into out[j] (each cap >=
 * tq_rans_bound(n)); len[k] their lengths: the bytes tq_rans_encode makes of each, faster. */
TQ_API tq_status tq_rans_encode_many(tq_ctx *ctx, size_t k, const uint8_t *sym, size_t n,
                                     uint8_t *const *out, size_t cap, size_t *len);
/* The length of the stream at in (len bytes available) and its largest symbol, from its model
 * alone; TQ_ERR_CORRUPT where the model is not whole. */
TQ_API tq_status tq_rans_stream_size(tq_ctx *ctx, const uint8_t *in, size_t len, size_t *size,
                                     uint32_t *max_sym);
/* k streams back into sym[k][n]: in[j] a stream of exactly len[j] bytes (its
 * tq_rans_stream_size); TQ_ERR_CORRUPT as tq_rans_decode. */
TQ_API tq_status tq_rans_decode_many(tq_ctx *ctx, size_t k, const uint8_t *const *in,
                                     const size_t *len, uint8_t *sym, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* TQ_H */
