/* test_bench_metrics.c - libtq's attention and reconstruction measures (lib/quality.c,
 * what tq bench reports) against a brute-force double-precision computation
 * written out here on a small case; the angle histogram KL is 0 for evenly
 * spread angles and log(bins) when all fall in one bin. */
#include "tq.h"
#include "harness.h"

#include <math.h>
#include <string.h>

TEST(bench_attention_metrics_equal_brute_force)
{
    enum { N = 6, D = 4, M = 2 };
    float k[N * D], v[N * D], q[M * D], kd[N * D], vd[N * D];
    unsigned long long st = 3;
    for (int i = 0; i < N * D; i++) {
        k[i] = (float)tq_test_randn(&st), v[i] = (float)tq_test_randn(&st);
        kd[i] = k[i] + 0.3f * (float)tq_test_randn(&st), vd[i] = v[i] + 0.2f * (float)tq_test_randn(&st);
    }
    for (int i = 0; i < M * D; i++) q[i] = 2 * (float)tq_test_randn(&st);
    tq_attn_head h = {D, N, M, 0, 1, k, v, q};
    tq_attn_error a;
    tq_ctx *ctx = tq_test_ctx();
    CHECK_EQ(tq_attention_error(ctx, &h, kd, vd, 2, 0, &a), TQ_OK);
    double kl = 0, oc = 0, top = 0;
    for (int m = 0; m < M; m++) {
        double s[N], sd[N], p[N], pd[N], z = 0, zd = 0;
        for (int i = 0; i < N; i++) {
            s[i] = sd[i] = 0;
            for (int j = 0; j < D; j++) s[i] += (double)q[m * D + j] * k[i * D + j] / 2, sd[i] += (double)q[m * D + j] * kd[i * D + j] / 2;
            z += exp(s[i]), zd += exp(sd[i]);
        }
        for (int i = 0; i < N; i++) p[i] = exp(s[i]) / z, pd[i] = exp(sd[i]) / zd, kl += p[i] * log(p[i] / pd[i]);
        double o[D] = {0}, od[D] = {0}, ab = 0, aa = 0, bb = 0;
        for (int i = 0; i < N; i++)
            for (int j = 0; j < D; j++) o[j] += p[i] * v[i * D + j], od[j] += pd[i] * vd[i * D + j];
        for (int j = 0; j < D; j++) ab += o[j] * od[j], aa += o[j] * o[j], bb += od[j] * od[j];
        oc += ab / sqrt(aa * bb);
        int t1[2] = {-1, -1}, t2[2] = {-1, -1}; /* the two largest of each */
        for (int r = 0; r < 2; r++)
            for (int i = 0; i < N; i++) {
                if (i != t1[0] && (t1[r] < 0 || p[i] > p[t1[r]])) t1[r] = i;
                if (i != t2[0] && (t2[r] < 0 || pd[i] > pd[t2[r]])) t2[r] = i;
            }
        top += ((t1[0] == t2[0]) + (t1[0] == t2[1]) + (t1[1] == t2[0]) + (t1[1] == t2[1])) / 2.0;
    }
    CHECK(fabs(a.kl - kl / M) < 1e-12 * (1 + kl), "KL %g vs %g", a.kl, kl / M);
    CHECK(fabs(a.out_cos - oc / M) < 1e-12, "output cosine %g vs %g", a.out_cos, oc / M);
    CHECK(fabs(a.topk - top / M) < 1e-12, "top-2 overlap %g vs %g", a.topk, top / M);
    CHECK_EQ(tq_attention_error(ctx, &h, k, v, 2, 0, &a), TQ_OK);
    CHECK(a.kl == 0 && fabs(a.out_cos - 1) < 1e-12 && a.topk == 1, "exact K/V: no distortion");
    /* every weight is below 1: every row skipped */
    CHECK_EQ(tq_attention_error(ctx, &h, k, v, 2, 1.0, &a), TQ_OK);
    CHECK(a.skipped == 1.0, "sparse V share %g", a.skipped);
    double se = 0, sx = 0, mx = 0, cs = 0;
    tq_recon_error(k, kd, N, D, &se, &sx, &mx, &cs);
    double bse = 0, bsx = 0, bmx = 0, bcs = 0;
    for (int i = 0; i < N; i++) {
        double ab = 0, aa = 0, bb = 0;
        for (int j = 0; j < D; j++) {
            double x = k[i * D + j], y = kd[i * D + j];
            bse += (x - y) * (x - y), bsx += x * x, bmx = fmax(bmx, fabs(x - y)), ab += x * y, aa += x * x, bb += y * y;
        }
        bcs += ab / sqrt(aa * bb);
    }
    CHECK(fabs(se - bse) < 1e-12);
    CHECK(fabs(sx - bsx) < 1e-12);
    CHECK_EQ(mx, bmx);
    CHECK(fabs(cs - bcs) < 1e-12);
    float ring[2 * 256], one[2 * 256];
    for (int i = 0; i < 256; i++) {
        double t = -M_PI + (i + 0.5) * 2 * M_PI / 256;
        ring[2 * i] = (float)cos(t), ring[2 * i + 1] = (float)sin(t), one[2 * i] = 1, one[2 * i + 1] = 0.001f;
    }
    CHECK(fabs(tq_angle_kl(ring, 256, 256)) < 1e-12, "evenly spread angles: KL 0");
    CHECK(fabs(tq_angle_kl(one, 256, 256) - log(256.0)) < 1e-12, "one bin: KL log(bins)");
}
