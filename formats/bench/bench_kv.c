/* bench_kv.c - `tq bench kv`: every KV codec on the same data, measured the
 * way the field reports a codec.  Layer 1 reconstruction (bits per value
 * with all overhead, relative MSE, cosine, max error; D_mse on unit vectors
 * beside the bounds 4^-b and 2.72 4^-b); layer 2 attention distortion
 * (softmax KL, output cosine, top-8 overlap against exact attention;
 * asymmetric K/V, boundary layers, sparse V); layer 3 is
 * tests/bench/kv_model_quality.py (llama.cpp restores); layer 4 speed
 * (GB/s of float32 per core scalar and SIMD, and on all cores; medians of
 * repetitions run interleaved, after a warm-up). */
#include "bench_measure.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static const bcodec *codec_named(const char *label)
{
    const bcodec *l;
    size_t n = bc_list(&l);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(l[i].label, label)) return &l[i];
    return NULL;
}

/* K and V of every head through kc and vc; attention against exact. */
static void run_heads(tq_ctx *ctx, const bworkload *w, const bcodec *kc, const bcodec *vc,
                      const bcodec *edge, double tau, bkv_row *row)
{
    double se = 0, sx = 0, mx = 0, cs = 0, nv = 0;
    memset(&row->attn, 0, sizeof row->attn);
    for (size_t i = 0; i < w->n_heads; i++) {
        const bhead *h = &w->h[i];
        int is_edge = edge && (h->layer == 0 || h->layer + 1 == h->n_layers);
        const bcodec *ck = is_edge ? edge : kc, *cv = is_edge ? edge : vc;
        bcodec_run rk, rv;
        char why[128];
        if (bc_open(ctx, ck, h->d, &rk, why, sizeof why)) {
            row->heads_skipped++;
            continue;
        }
        if (bc_open(ctx, cv, h->d, &rv, why, sizeof why)) {
            bc_close(&rk);
            row->heads_skipped++;
            continue;
        }
        size_t nn = (size_t)h->n * h->d;
        uint8_t *buf = malloc(bc_bound(&rk, h->n) > bc_bound(&rv, h->n) ? bc_bound(&rk, h->n)
                                                                        : bc_bound(&rv, h->n));
        float *kd = malloc(nn * 4), *vd = malloc(nn * 4);
        uint64_t bk = buf && kd && vd ? bc_encode(ctx, &rk, h->k, h->n, buf) : 0;
        int ok = bk && !bc_decode(ctx, &rk, buf, bk, h->n, kd);
        uint64_t bv = ok ? bc_encode(ctx, &rv, h->v, h->n, buf) : 0;
        ok = ok && bv && !bc_decode(ctx, &rv, buf, bv, h->n, vd);
        if (ok) {
            battn a;
            const tq_attn_head ah = {h->d, h->n, h->m, h->layer, h->n_layers, h->k, h->v, h->q};
            tq_recon_error(h->k, kd, h->n, h->d, &se, &sx, &mx, &cs);
            tq_recon_error(h->v, vd, h->n, h->d, &se, &sx, &mx, &cs);
            if (tq_attention_error(ctx, &ah, kd, vd, 8, tau, &a)) memset(&a, 0, sizeof a);
            row->attn.kl += a.kl;
            row->attn.out_cos += a.out_cos;
            row->attn.topk += a.topk;
            row->attn.skipped += a.skipped;
            row->bytes += bk + bv;
            row->values += 2 * nn;
            row->heads++;
            nv += 2.0 * h->n;
        } else {
            row->heads_skipped++;
        }
        free(buf);
        free(kd);
        free(vd);
        bc_close(&rk);
        bc_close(&rv);
    }
    double nh = row->heads ? (double)row->heads : NAN;
    row->bpv = row->values ? 8.0 * row->bytes / row->values : NAN;
    row->rel_mse = sx > 0 ? se / sx : NAN;
    row->cosine = nv ? cs / nv : NAN;
    row->max_err = mx;
    row->attn.kl /= nh;
    row->attn.out_cos /= nh;
    row->attn.topk /= nh;
    row->attn.skipped /= nh;
}

/* D_mse and mean cosine on random unit vectors of 128 */
static void unit_vectors(tq_ctx *ctx, const bcodec *c, size_t n, double *dmse, double *cosine,
                         double *ip_bias, double *ip_var)
{
    *dmse = *cosine = NAN;
    if (ip_bias) *ip_bias = *ip_var = NAN;
    bcodec_run r;
    char why[128];
    if (bc_open(ctx, c, 128, &r, why, sizeof why)) return;
    float *x = malloc(n * 128 * 4), *y = malloc(n * 128 * 4);
    uint8_t *buf = malloc(bc_bound(&r, n) + 64);
    uint64_t s = 77;
    for (size_t v = 0; x && v < n; v++) {
        double nn = 0;
        for (int j = 0; j < 128; j++) {
            uint64_t a = (s += 0x9E3779B97F4A7C15ull), b = (s += 0x9E3779B97F4A7C15ull);
            a = (a ^ (a >> 31)) * 0xBF58476D1CE4E5B9ull;
            b = (b ^ (b >> 29)) * 0x94D049BB133111EBull;
            double u1 = ((a >> 11) + 0.5) / 9007199254740992.0, u2 = (b >> 11) / 9007199254740992.0;
            x[v * 128 + j] = (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
            nn += (double)x[v * 128 + j] * x[v * 128 + j];
        }
        for (int j = 0; j < 128; j++) x[v * 128 + j] /= (float)sqrt(nn);
    }
    uint64_t bytes = x && y && buf ? bc_encode(ctx, &r, x, n, buf) : 0;
    if (bytes && !bc_decode(ctx, &r, buf, bytes, n, y)) {
        double se = 0, sx = 0, mx = 0, cs = 0;
        tq_recon_error(x, y, n, 128, &se, &sx, &mx, &cs);
        *dmse = se / n;
        *cosine = cs / n;
        if (ip_bias) { /* against the next vector as y: the inner-product error of unit vectors */
            double s1 = 0, s2 = 0;
            for (size_t v = 0; v < n; v++) {
                const float *yy = x + ((v + 1) % n) * 128;
                double e = 0;
                for (int j = 0; j < 128; j++)
                    e += (double)yy[j] * (y[v * 128 + j] - x[v * 128 + j]);
                s1 += e;
                s2 += e * e;
            }
            *ip_bias = s1 / n;
            *ip_var = s2 / n - (s1 / n) * (s1 / n);
        }
    }
    free(x);
    free(y);
    free(buf);
    bc_close(&r);
}

/* Layer 4: encode and decode of one buffer, three configurations run
 * interleaved in every repetition after a warm-up; medians and spread. */
static void speed(tq_ctx *ctx, const bcodec *c, const float *x, size_t n_vec, int reps, int threads,
                  bkv_row *row)
{
    bcodec_run r;
    char why[128];
    row->enc_scalar = row->enc_simd = row->enc_all = row->dec_scalar = row->dec_simd =
        row->dec_all = NAN;
    if (bc_open(ctx, c, 128, &r, why, sizeof why)) return;
    uint8_t *buf = malloc(bc_bound(&r, n_vec) + 64);
    float *y = malloc(n_vec * 128 * 4);
    double t[3][2][64], gb = n_vec * 128 * 4e-9;
    const tq_simd simd[3] = {TQ_SIMD_SCALAR, tq_simd_best(), tq_simd_best()};
    const int th[3] = {1, 1, threads};
    uint64_t bytes = buf && y ? bc_encode(ctx, &r, x, n_vec, buf) : 0;
    for (int rep = -1; bytes && rep < reps; rep++)
        for (int k = 0; k < 3; k++) {
            tq_ctx_set_simd(ctx, simd[k]);
            tq_ctx_set_threads(ctx, th[k]);
            double t0 = bench_now();
            bc_encode(ctx, &r, x, n_vec, buf);
            double t1 = bench_now();
            bc_decode(ctx, &r, buf, bytes, n_vec, y);
            double t2 = bench_now();
            if (rep >= 0) {
                t[k][0][rep] = t1 - t0;
                t[k][1][rep] = t2 - t1;
            }
        }
    tq_ctx_set_simd(ctx, TQ_SIMD_AUTO);
    row->scores_gbps = row->decode_dot_gbps = NAN;
    if (bytes && r.tc) { /* one query against every key: from the blocks, and decode then dot */
        float *sc = malloc(n_vec * sizeof *sc), q[128];
        for (int j = 0; j < 128; j++) q[j] = x[j];
        tq_ctx_set_threads(ctx, 1);
        double ts[64], td[64];
        for (int rep = -1; sc && rep < reps; rep++) {
            double a = bench_now();
            tq_scores(ctx, r.tc, q, buf, n_vec, sc);
            double b2 = bench_now();
            bc_decode(ctx, &r, buf, bytes, n_vec, y);
            for (size_t v = 0; v < n_vec; v++) {
                float s = 0;
                for (int j = 0; j < 128; j++) s += q[j] * y[v * 128 + j];
                sc[v] = s;
            }
            double c2 = bench_now();
            if (rep >= 0) {
                ts[rep] = b2 - a;
                td[rep] = c2 - b2;
            }
        }
        if (sc) {
            row->scores_gbps = gb / bench_median(ts, reps);
            row->decode_dot_gbps = gb / bench_median(td, reps);
        }
        free(sc);
    }
    tq_ctx_set_threads(ctx, threads);
    double *out[3][2] = {{&row->enc_scalar, &row->dec_scalar},
                         {&row->enc_simd, &row->dec_simd},
                         {&row->enc_all, &row->dec_all}};
    for (int k = 0; bytes && k < 3; k++)
        for (int e = 0; e < 2; e++) {
            double med = bench_median(t[k][e], reps); /* t[k][e] sorted: the spread's ends */
            *out[k][e] = gb / med;
            if (k == 1)
                *(e ? &row->dec_spread : &row->enc_spread) = (t[k][e][reps - 1] - t[k][e][0]) / med;
        }
    free(buf);
    free(y);
    bc_close(&r);
}

static void extras(tq_ctx *ctx, const bworkload *w, bkv_result *res)
{
    static const char *pairs[][2] = {
        {"q8_0", "turbo3"}, {"q8_0", "tq b=2"}, {"tq b=4", "tq b=3"}, {"tq b=4", "tq b=2"}};
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        bkv_row row = {0};
        run_heads(ctx, w, codec_named(pairs[i][0]), codec_named(pairs[i][1]), NULL, 0, &row);
        bkv_pair *p = &res->pairs[res->n_pairs++];
        snprintf(p->what, sizeof p->what, "K %s / V %s", pairs[i][0], pairs[i][1]);
        p->bpv = row.bpv;
        p->attn = row.attn;
    }
    bkv_row row = {0};
    run_heads(ctx, w, codec_named("tq b=3"), codec_named("tq b=3"), codec_named("q8_0"), 0, &row);
    bkv_pair *p = &res->pairs[res->n_pairs++];
    snprintf(p->what, sizeof p->what, "tq b=3, first and last layer q8_0 (boundary layers)");
    p->bpv = row.bpv;
    p->attn = row.attn;
    memset(&row, 0, sizeof row);
    run_heads(ctx, w, codec_named("tq b=4"), codec_named("tq b=4"), NULL, 1e-3, &row);
    p = &res->pairs[res->n_pairs++];
    snprintf(p->what, sizeof p->what, "tq b=4, sparse V: rows with weight < 1e-3 skipped (%.1f%%)",
             100 * row.attn.skipped);
    p->bpv = row.bpv;
    p->attn = row.attn;
}

/* The post-rotation pair angles of the d = 128 keys, against uniform. */
static void angle_hist(tq_ctx *ctx, const bworkload *w, bkv_result *res)
{
    float s1[128], s2[128];
    res->angle_kl_rotated = res->angle_kl_raw = NAN;
    tq_signs_kv(ctx, 128, 0, s1, s2);
    for (size_t i = 0; i < w->n_heads; i++) {
        const bhead *h = &w->h[i];
        if (h->d != 128) continue;
        size_t nn = (size_t)h->n * 128;
        float *y = malloc(nn * 4);
        if (!y) return;
        memcpy(y, h->k, nn * 4);
        res->angle_kl_raw = tq_angle_kl(y, nn / 2, 256);
        for (size_t v = 0; v < h->n; v++) tq_rht_forward(ctx, 128, s1, s2, y + v * 128);
        res->angle_kl_rotated = tq_angle_kl(y, nn / 2, 256);
        free(y);
        return;
    }
}

/* The speed buffer: generated d = 128 keys, repeated (one layout every codec is timed on). */
static float *speed_values(size_t n)
{
    float *sx = malloc(n * sizeof *sx); /* [n] */
    bworkload sw;
    if (!sx || bw_builtin(&sw, 1)) {
        free(sx);
        return NULL;
    }
    for (size_t i = 0; i < sw.n_heads; i++)
        if (sw.h[i].d == 128) {
            size_t have = (size_t)sw.h[i].n * 128;
            for (size_t j = 0; j < n; j++) sx[j] = sw.h[i].k[j % have];
            break;
        }
    bw_free(&sw);
    return sx;
}

/* Layers 1, 2 and 4 for every codec, and the theory rows beside them. */
static void measure_codecs(tq_ctx *ctx, const bworkload *w, const bkv_opts *o, const float *sx,
                           bkv_result *res)
{
    const bcodec *codecs;
    size_t nc = bc_list(&codecs);
    size_t n_speed = res->speed_values / 128;
    size_t n_unit = o->quick ? 1000 : 4000;
    for (size_t i = 0; i < nc; i++) {
        bkv_row *row = &res->rows[i];
        row->c = &codecs[i];
        run_heads(ctx, w, &codecs[i], &codecs[i], NULL, 0, row);
        unit_vectors(ctx, &codecs[i], n_unit, &row->unit_dmse, &row->unit_cos, &row->ip_bias,
                     &row->ip_var);
        speed(ctx, &codecs[i], sx, n_speed, o->reps, res->threads, row);
    }
    for (uint32_t b = 1; b <= 4; b++) {
        tq_codebook cb;
        res->theory_dmse[b - 1] = tq_codebook_get(ctx, TQ_CB_EXACT, 128, b, &cb) ? NAN : cb.mse;
        bcodec plain = {"tq", "tq", b, TQ_CODEC_TQ, b, 0, 0, -1};
        double cosine;
        unit_vectors(ctx, &plain, n_unit, &res->theory_measured[b - 1], &cosine, NULL, NULL);
    }
}

tq_status bkv_measure(tq_ctx *ctx, const bkv_opts *o, const tq_model *model, bkv_result *res)
{
    double t0 = bench_now();
    const bcodec *codecs;
    size_t nc = bc_list(&codecs);
    int threads = o->threads > 0 ? o->threads : tq_ctx_threads(ctx);
    tq_ctx_set_threads(ctx, threads);
    *res = (bkv_result){.n_rows = nc, .reps = o->reps, .threads = threads};
    res->speed_values = o->quick ? (1u << 18) : (1u << 20);
    bworkload w;
    char err[512] = "";
    int rc = o->kv ? bw_from_file(ctx, &w, o->kv, model, o->quick, err, sizeof err)
                   : bw_builtin(&w, o->quick);
    if (rc) {
        bw_free(&w);
        return tq_ctx_set_error(ctx, err[0] ? TQ_ERR_FORMAT : TQ_ERR_NOMEM, "%s",
                                err[0] ? err : "out of memory for the workload");
    }
    snprintf(res->workload, sizeof res->workload, "%s", w.what);
    res->rows = calloc(nc, sizeof(bkv_row));
    float *sx = speed_values(res->speed_values); /* [speed_values] */
    if (!res->rows || !sx) {
        free(sx);
        bw_free(&w);
        bkv_result_free(res);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    measure_codecs(ctx, &w, o, sx, res);
    extras(ctx, &w, res);
    angle_hist(ctx, &w, res);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    res->peak_mb = ru.ru_maxrss / 1024.0;
    res->seconds = bench_now() - t0;
    free(sx);
    bw_free(&w);
    return TQ_OK;
}

void bkv_result_free(bkv_result *res)
{
    free(res->rows);
    res->rows = NULL;
}
