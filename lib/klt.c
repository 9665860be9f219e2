/* klt.c - transform coding of vectors (tq.h, "transform coding"): the projection on a
 * basis and back, and the covariance the basis comes from (the quantizer step for a rate is
 * klt_rate.c's).  Snapshots use it for K and V rows (formats/tqkv/TQKV.md, "Transform
 * coding"). */
#include "klt_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* m[kd][nc] (row-major, nc % 8 == 0) into panels of 16 columns (the last
 * of 8 where nc % 16 == 8): columns [c0, c0 + w) as kd x w floats at
 * dst + kd * c0, what the products read front to back. */
static void pack_panels(const float *m, size_t kd, size_t nc, float *dst)
{
    for (size_t c0 = 0; c0 < nc; c0 += 16) {
        size_t w = nc - c0 >= 16 ? 16 : 8;
        for (size_t k = 0; k < kd; k++) memcpy(dst + kd * c0 + k * w, m + k * nc + c0, w * 4);
    }
}

/* The products' right-hand sides from basis[m][d]: its transpose [d][mp]
 * (coefficients from rows) or itself [mp][d] (rows from coefficients),
 * zero-padded to mp = m rounded up to 8, in panels; NULL when out of
 * memory. */
static float *basis_panels(const float *basis, uint32_t m, uint32_t d, uint32_t mp, int transpose)
{
    float *rm = calloc((size_t)d * mp, sizeof *rm); /* row-major first */
    float *p = malloc((size_t)d * mp * sizeof *p);
    if (!rm || !p) {
        free(rm);
        free(p);
        return NULL;
    }
    for (uint32_t c = 0; c < m; c++)
        for (uint32_t j = 0; j < d; j++) {
            float v = basis[(size_t)c * d + j];
            if (transpose)
                rm[(size_t)j * mp + c] = v;
            else
                rm[(size_t)c * d + j] = v;
        }
    if (transpose)
        pack_panels(rm, d, mp, p);
    else
        pack_panels(rm, mp, d, p);
    free(rm);
    return p;
}

/* out[n][nc] = a[n][kd] . m (packed), nc % 8 == 0, a[r][k] at a[r * rs + k * ks]: each
 * output a chain of fused multiply-adds over k ascending, as the AVX2 version computes it,
 * so that every SIMD level writes the same bytes; lower: only out[r][c] with c <= r is needed
 * (others may be left); out's rows os floats apart. */
static void matmul_scalar(const float *a, size_t rs, size_t ks, size_t n, size_t kd,
                          const float *m, size_t nc, int lower, float *out, size_t os)
{
    for (size_t r = 0; r < n; r++)
        for (size_t c0 = 0; c0 < nc && (!lower || c0 <= r); c0 += 16) {
            size_t w = nc - c0 >= 16 ? 16 : 8;
            const float *p = m + kd * c0;
            float *o = out + r * os + c0;
            memset(o, 0, w * sizeof *o);
            for (size_t k = 0; k < kd; k++) {
                float x = a[r * rs + k * ks];
                for (size_t c = 0; c < w; c++) o[c] = fmaf(x, p[k * w + c], o[c]);
            }
        }
}

/* Asked of the CPU once: the products and roundings ask at every tile (1: yes, 0: no). */
static int cpu_has_fma(void)
{
    static int known = -1; /* racing threads store the same answer */
#if defined(__x86_64__) || defined(__i386__)
    if (known < 0) {
        __builtin_cpu_init();
        known = __builtin_cpu_supports("fma") != 0;
    }
#else
    known = 0;
#endif
    return known;
}

int tq_klt_use_avx2(const tq_ctx *ctx)
{
    return ctx->simd != TQ_SIMD_SCALAR && tq_klt_have_avx2() && cpu_has_fma();
}

static void matmul_part(const tq_ctx *ctx, const float *a, size_t rs, size_t ks, size_t n,
                        size_t kd, const float *m, size_t nc, int lower, float *out, size_t os)
{
    if (tq_klt_use_avx2(ctx))
        tq_klt_matmul_avx2(a, rs, ks, n, kd, m, nc, lower, out, os);
    else
        matmul_scalar(a, rs, ks, n, kd, m, nc, lower, out, os);
}

static void matmul(const tq_ctx *ctx, const float *a, size_t rs, size_t ks, size_t n, size_t kd,
                   const float *m, size_t nc, float *out)
{
    matmul_part(ctx, a, rs, ks, n, kd, m, nc, 0, out, nc);
}

static uint32_t pad8(uint32_t m) { return (m + 7) / 8 * 8; }

/* v clamped to +-32767 (NaN to -32767) and rounded to nearest even: adding
 * and taking away 1.5 * 2^23 leaves the integer part (exact below 2^22;
 * no library call in the inner loops) */
static inline float round_index(float v)
{
    v = v > -32767.0f ? v : -32767.0f; /* a max and a min the loops vectorize */
    v = v < 32767.0f ? v : 32767.0f;
    const float magic = 12582912.0f; /* IEEE order: without -ffast-math never folded away */
    return (v + magic) - magic;
}

void tq_klt_round_all(int avx2, const float *y, size_t n, float inv, int32_t bias, int32_t *q)
{
    size_t i = avx2 ? tq_klt_round_avx2(y, n, inv, bias, q) : 0;
    for (; i < n; i++) q[i] = (int32_t)round_index(y[i] * inv) + bias;
}

static void round_all16(int avx2, const float *y, size_t n, float inv, int16_t *q)
{
    size_t i = avx2 ? tq_klt_round16_avx2(y, n, inv, q) : 0;
    for (; i < n; i++) q[i] = (int16_t)round_index(y[i] * inv);
}

static tq_status check_klt(tq_ctx *ctx, const tq_klt *k)
{
    if (!k->d || k->d % 8 || k->d > 4096 || k->m > k->d)
        return tq_ctx_set_error(
            ctx, TQ_ERR_ARG, "a transform of %u components for vectors of %u values", k->m, k->d);
    if (!(k->step > 0) || !isfinite(k->step))
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "quantizer step %g (finite and > 0 needed)",
                                (double)k->step);
    for (size_t i = 0; i < (size_t)k->m * k->d; i++)
        if (!isfinite(k->basis[i]))
            return tq_ctx_set_error(ctx, TQ_ERR_ARG, "a basis value that is not finite (%zu)", i);
    return TQ_OK;
}

/* rows per product: the tile's rows and coefficients stay in L2, and the
 * AVX2 product takes rows six at a time */
enum { TILE = 60 };
/* rows per product where the encoder takes them as its columns (a multiple of 16: whole
 * panels) */
enum { ENC_TILE = 64 };

tq_status tq_klt_encode(tq_ctx *ctx, const tq_klt *k, const float *x, size_t n, size_t stride,
                        int16_t *idx)
{
    TQ_NEED_CTX(ctx);
    tq_status st = check_klt(ctx, k);
    if (st) return st;
    if (!k->m || !n) return TQ_OK;
    uint32_t d = k->d;
    float *xp = calloc((size_t)d * ENC_TILE, sizeof *xp);  /* [d][ENC_TILE]: rows as columns */
    float *yt = malloc((size_t)k->m * ENC_TILE * sizeof *yt); /* [m][ENC_TILE]: coefficients */
    if (!xp || !yt) {
        free(xp);
        free(yt);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    float inv = 1.0f / k->step;
    int avx2 = tq_klt_use_avx2(ctx);
    /* the coefficients component-major, as the indices go out, from the basis's rows against
       the rows as columns (each product's chain as in rows against the basis: fma is
       symmetric); read row-major and quantized by columns, the rows' coefficients were a
       quarter of the encoder's CPU */
    for (size_t r0 = 0; r0 < n; r0 += ENC_TILE) {
        size_t nr = n - r0 < ENC_TILE ? n - r0 : ENC_TILE, np = (nr + 7) / 8 * 8;
        for (size_t c0 = 0; c0 < np; c0 += 16) { /* panels of 16 rows (the last of 8) */
            size_t w = np - c0 >= 16 ? 16 : 8;
            float *panel = xp + (size_t)d * c0;
            for (size_t h = 0; h < w; h += 8) { /* eight rows at a time */
                if (avx2 && d % 8 == 0 && c0 + h + 8 <= nr) {
                    tq_klt_columns8_avx2(x + (r0 + c0 + h) * stride, stride, d, panel + h, w);
                    continue;
                }
                for (size_t r = c0 + h; r < c0 + h + 8; r++)
                    for (uint32_t j = 0; j < d; j++)
                        panel[j * w + r - c0] = r < nr ? x[(r0 + r) * stride + j] : 0.0f;
            }
        }
        matmul(ctx, k->basis, d, 1, k->m, d, xp, np, yt);
        for (uint32_t c = 0; c < k->m; c++)
            round_all16(avx2, yt + c * np, nr, inv, idx + (size_t)c * n + r0);
    }
    free(xp);
    free(yt);
    return TQ_OK;
}

tq_status tq_klt_decode(tq_ctx *ctx, const tq_klt *k, const int16_t *idx, size_t n, float *x,
                        size_t stride)
{
    TQ_NEED_CTX(ctx);
    tq_status st = check_klt(ctx, k);
    if (st) return st;
    uint32_t d = k->d, mp = pad8(k->m ? k->m : 1);
    if (!k->m) {
        for (size_t r = 0; r < n; r++) memset(x + r * stride, 0, d * sizeof *x);
        return TQ_OK;
    }
    float *ct = calloc((size_t)mp * TILE, sizeof *ct);   /* [mp][TILE]: coefficients, padded */
    float *bp = basis_panels(k->basis, k->m, d, mp, 0); /* [mp][d] in panels */
    if (!ct || !bp) {
        free(ct);
        free(bp);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    for (size_t r0 = 0; r0 < n; r0 += TILE) {
        size_t nr = n - r0 < TILE ? n - r0 : TILE;
        /* component-major as the indices come, so that this loop vectorizes: the product reads
           it strided (filled row-major, a scatter, it was a fifth of the decode's CPU) */
        for (uint32_t c = 0; c < k->m; c++)
            for (size_t r = 0; r < nr; r++)
                ct[c * TILE + r] = (float)idx[(size_t)c * n + r0 + r] * k->step;
        /* the rows straight into x: through a tile, their copy was 5% of the decode */
        matmul_part(ctx, ct, 1, TILE, nr, mp, bp, d, 0, x + r0 * stride, stride);
    }
    free(ct);
    free(bp);
    return TQ_OK;
}

tq_status tq_klt_project(tq_ctx *ctx, const float *basis, uint32_t m, uint32_t d, const float *x,
                         size_t n, size_t stride, float *y)
{
    TQ_NEED_CTX(ctx);
    if (!d || d % 8 || m > d || m % 8)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "projecting on %u of %u components", m, d);
    float *bt = basis_panels(basis, m, d, m, 1);       /* [d][m] in panels */
    float *xt = malloc((size_t)TILE * d * sizeof *xt); /* [TILE][d] */
    if (!bt || !xt) {
        free(bt);
        free(xt);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    for (size_t r0 = 0; r0 < n; r0 += TILE) {
        size_t nr = n - r0 < TILE ? n - r0 : TILE;
        for (size_t r = 0; r < nr; r++) memcpy(xt + r * d, x + (r0 + r) * stride, d * sizeof *xt);
        matmul(ctx, xt, d, 1, nr, d, bt, m, y + r0 * m);
    }
    free(bt);
    free(xt);
    return TQ_OK;
}

tq_status tq_covariance(tq_ctx *ctx, const float *x, size_t n, uint32_t d, size_t stride,
                        double *cov)
{
    TQ_NEED_CTX(ctx);
    if (!n || !d || d % 8) return tq_ctx_set_error(ctx, TQ_ERR_ARG, "covariance of %zu x %u", n, d);
    float *xr = malloc((size_t)n * d * sizeof *xr); /* [n][d]: the rows, contiguous */
    float *xp = malloc((size_t)n * d * sizeof *xp); /* xr in panels */
    float *c = malloc((size_t)d * d * sizeof *c);   /* [d][d] */
    if (!xr || !xp || !c) {
        free(xr);
        free(xp);
        free(c);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    for (size_t r = 0; r < n; r++) memcpy(xr + r * d, x + r * stride, d * sizeof *xr);
    pack_panels(xr, n, d, xp);
    /* x^T x, x's columns read as the product's rows: its lower triangle (the half it needs) */
    matmul_part(ctx, xr, 1, d, d, n, xp, d, 1, c, d);
    free(xp);
    /* symmetric to the bit: the product's two triangles sum in one order */
    for (uint32_t i = 0; i < d; i++)
        for (uint32_t j = 0; j <= i; j++) {
            double v = (double)c[(size_t)i * d + j] / (double)n;
            cov[(size_t)i * d + j] = v;
            cov[(size_t)j * d + i] = v;
        }
    free(xr);
    free(c);
    return TQ_OK;
}

