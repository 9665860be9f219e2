/* bench_report.c - `tq bench kv` results: the aligned table, the JSON with
 * every figure and the machine, and the SVG picture (distortion against bits
 * per value with the paper's two bounds; decode throughput bars). */
#include "bench_kv.h"
#include "json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define LOWER(b) pow(4.0, -(b))
#define UPPER(b) (sqrt(3.0) * M_PI / 2 * pow(4.0, -(b))) /* (sqrt 3 pi / 2) 4^-b ~ 2.72 4^-b */

/* LARQL's contract on unit vectors: cosine >= 0.88 at 4 bits, >= 0.85 at 3 */
static const char *larql(const bkv_row *r)
{
    double bits = r->c->nominal_bits;
    double need = 0; /* the LARQL contract's cosine floor: 4-bit 0.88, 3-bit 0.85 */
    if (bits >= 3.5 && bits <= 4.5)
        need = 0.88;
    else if (bits >= 2.5 && bits < 3.5)
        need = 0.85;
    if (!need || isnan(r->unit_cos)) return NULL;
    return r->unit_cos >= need ? "pass" : "fail";
}

static void cpu_name(char *b, size_t n)
{
    snprintf(b, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            char *v = strchr(line, ':') + 2;
            v[strcspn(v, "\n")] = 0;
            snprintf(b, n, "%s", v);
            break;
        }
    if (f) fclose(f);
}

void bkv_print_table(const bkv_result *r)
{
    printf("tq bench kv: %s\n", r->workload);
    printf("layer 1 reconstruction (K and V of every head; unit: random unit vectors, d = 128), "
           "layer 2 attention\n"
           "(exact softmax attention vs decoded K/V, mean over queries), layer 4 speed (GB/s of "
           "float32, %zu values,\n"
           "median of %d after a warm-up; 1 core scalar -> SIMD, and %d threads)\n\n",
           r->speed_values, r->reps, r->threads);
    printf("%-16s %6s %6s %9s %7s %8s %9s %5s | %9s %7s %6s | %12s %12s %6s %6s\n", "codec", "bits",
           "x f16", "rel_mse", "cos", "max_err", "unit Dmse", "LARQL", "attn KL", "out cos",
           "top-8", "enc 1c s->v", "dec 1c s->v", "enc N", "dec N");
    for (size_t i = 0; i < r->n_rows; i++) {
        const bkv_row *w = &r->rows[i];
        const char *l = larql(w);
        printf("%-16s %6.3f %6.2f %9.2e %7.4f %8.3g %9.2e %5s | %9.2e %7.4f %6.3f | %5.2f->%5.2f "
               "%5.2f->%5.2f %6.2f %6.2f\n",
               w->c->label, w->bpv, 16 / w->bpv, w->rel_mse, w->cosine, w->max_err, w->unit_dmse,
               l ? l : "-", w->attn.kl, w->attn.out_cos, w->attn.topk, w->enc_scalar, w->enc_simd,
               w->dec_scalar, w->dec_simd, w->enc_all, w->dec_all);
    }
    printf("\ninner products of unit vectors (d = 128; y another unit vector): bias and variance, "
           "the paper's bound\n"
           "for TurboQuant-prod sqrt(3) pi^2 / d 4^-b; and attention scores straight from the "
           "blocks against\n"
           "decode-then-dot (one query, every key, one core, GB/s of float32 keys):\n");
    for (size_t i = 0; i < r->n_rows; i++) {
        const bkv_row *w = &r->rows[i];
        if (isnan(w->scores_gbps)) continue;
        printf("  %-16s bias %+9.2e  variance %9.2e", w->c->label, w->ip_bias, w->ip_var);
        if (!strcmp(w->c->family, "prod"))
            printf(" (bound %9.2e)", sqrt(3.0) * M_PI * M_PI / 128 * pow(4.0, -(double)w->c->bits));
        else
            printf("                  ");
        printf("  scores %6.2f  decode+dot %6.2f\n", w->scores_gbps, w->decode_dot_gbps);
    }
    printf("\nattention, other K/V choices:\n");
    for (size_t i = 0; i < r->n_pairs; i++)
        printf("  %-62s %6.3f bits  KL %9.2e  out cos %.4f  top-8 %.3f\n", r->pairs[i].what,
               r->pairs[i].bpv, r->pairs[i].attn.kl, r->pairs[i].attn.out_cos,
               r->pairs[i].attn.topk);
    printf("\nD_mse per unit vector, d = 128 (tq's exact codebook, no norm correction):\n");
    for (int b = 1; b <= 4; b++)
        printf("  b=%d  codebook %.5f  measured %.5f  lower 4^-b %.5f  upper 2.72 4^-b %.5f\n", b,
               r->theory_dmse[b - 1], r->theory_measured[b - 1], LOWER(b), UPPER(b));
    printf("\npair angles of the d = 128 keys, KL to uniform over 256 bins: %.4f raw, %.5f after "
           "the rotation\n",
           r->angle_kl_raw, r->angle_kl_rotated);
    printf("peak memory %.0f MB, %.1f s\n", r->peak_mb, r->seconds);
}

static void jnum(const char *k, double v, int last)
{
    printf("\"%s\": ", k);
    json_double(stdout, v, 6);
    printf(last ? "" : ", ");
}

static void jattn(const battn *a)
{
    jnum("attn_kl", a->kl, 0);
    jnum("attn_out_cosine", a->out_cos, 0);
    jnum("top8_overlap", a->topk, 0);
}

void bkv_print_json(const bkv_result *r)
{
    char cpu[256];
    cpu_name(cpu, sizeof cpu);
    printf("{\"workload\": ");
    json_cstr(stdout, r->workload);
    printf(",\n \"machine\": {\"cpu\": ");
    json_cstr(stdout, cpu);
    printf(", \"cores\": %ld, \"simd\": \"%s\", \"threads\": %d},\n \"codecs\": [\n",
           sysconf(_SC_NPROCESSORS_ONLN), tq_simd_name(tq_simd_best()), r->threads);
    for (size_t i = 0; i < r->n_rows; i++) {
        const bkv_row *w = &r->rows[i];
        const char *l = larql(w);
        printf("  {\"name\": ");
        json_cstr(stdout, w->c->label);
        printf(", \"family\": \"%s\", ", w->c->family);
        jnum("nominal_bits", w->c->nominal_bits, 0);
        jnum("bits_per_value", w->bpv, 0);
        jnum("ratio_fp16", 16 / w->bpv, 0);
        jnum("rel_mse", w->rel_mse, 0);
        jnum("cosine", w->cosine, 0);
        jnum("max_abs_error", w->max_err, 0);
        jnum("unit_dmse", w->unit_dmse, 0);
        jnum("unit_cosine", w->unit_cos, 0);
        printf("\"larql\": %s%s%s, ", l ? "\"" : "", l ? l : "null", l ? "\"" : "");
        jattn(&w->attn);
        jnum("encode_gbps", w->enc_simd, 0);
        jnum("decode_gbps", w->dec_simd, 0);
        jnum("encode_gbps_scalar", w->enc_scalar, 0);
        jnum("decode_gbps_scalar", w->dec_scalar, 0);
        jnum("encode_gbps_all", w->enc_all, 0);
        jnum("decode_gbps_all", w->dec_all, 0);
        jnum("encode_spread", w->enc_spread, 0);
        jnum("decode_spread", w->dec_spread, 0);
        jnum("ip_bias", w->ip_bias, 0);
        jnum("ip_variance", w->ip_var, 0);
        if (!strcmp(w->c->family, "prod")) /* the paper's bound for unit x and y, d = 128 */
            jnum("ip_variance_bound", sqrt(3.0) * M_PI * M_PI / 128 * pow(4.0, -(double)w->c->bits),
                 0);
        jnum("scores_gbps", w->scores_gbps, 0);
        jnum("decode_dot_gbps", w->decode_dot_gbps, 0);
        printf("\"heads\": %zu, \"heads_skipped\": %zu, \"bytes\": %llu, \"values\": %llu}%s\n",
               w->heads, w->heads_skipped, (unsigned long long)w->bytes,
               (unsigned long long)w->values, i + 1 < r->n_rows ? "," : "");
    }
    printf(" ],\n \"theory\": [");
    for (int b = 1; b <= 4; b++) {
        printf("%s{\"bits\": %d, ", b > 1 ? ", " : "", b);
        jnum("dmse", r->theory_dmse[b - 1], 0);
        jnum("measured", r->theory_measured[b - 1], 0);
        jnum("lower", LOWER(b), 0);
        jnum("upper", UPPER(b), 1);
        printf("}");
    }
    printf("],\n \"pairs\": [");
    for (size_t i = 0; i < r->n_pairs; i++) {
        printf("%s{\"what\": ", i ? ", " : "");
        json_cstr(stdout, r->pairs[i].what);
        printf(", ");
        jnum("bits_per_value", r->pairs[i].bpv, 0);
        jattn(&r->pairs[i].attn);
        jnum("skipped", r->pairs[i].attn.skipped, 1);
        printf("}");
    }
    printf("],\n \"angle_histogram_kl\": {");
    jnum("raw", r->angle_kl_raw, 0);
    jnum("rotated", r->angle_kl_rotated, 1);
    printf("},\n \"speed\": {\"values\": %zu, \"reps\": %d, \"threads\": %d}, ", r->speed_values,
           r->reps, r->threads);
    jnum("peak_rss_mb", r->peak_mb, 0);
    jnum("seconds", r->seconds, 1);
    printf("}\n");
}

static const char *color(const char *family)
{
    static const struct {
        const char *f, *c;
    } m[] = {{"tq", "#1f77b4"},   {"turbo", "#ff7f0e"}, {"angle", "#2ca02c"}, {"prod", "#d62728"},
             {"ggml", "#9467bd"}, {"f16", "#7f7f7f"},   {"zstd", "#8c564b"}};
    for (size_t i = 0; i < sizeof m / sizeof *m; i++)
        if (!strcmp(family, m[i].f)) return m[i].c;
    return "#000000";
}

static void esc(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '&')
            fputs("&amp;", f);
        else
            fputc(*s, f);
    }
}

/* The SVG's right panel: decode throughput bars, one a codec, between y0 and y1. */
static void svg_throughput_bars(FILE *f, const bkv_result *r, double y0, double y1)
{
    const double bx0 = 640, bx1 = 960;
    double mx = 0;
    for (size_t i = 0; i < r->n_rows; i++)
        if (r->rows[i].dec_simd > mx) mx = r->rows[i].dec_simd;
    fprintf(f, "<text x=\"%.0f\" y=\"22\" font-size=\"13\">decode GB/s, one core (SIMD)</text>\n",
            bx0 - 60);
    double bh = (y1 - y0) / (double)(r->n_rows ? r->n_rows : 1);
    for (size_t i = 0; i < r->n_rows; i++) {
        const bkv_row *w = &r->rows[i];
        double y = y0 + i * bh,
               len = mx > 0 && w->dec_simd > 0 ? w->dec_simd / mx * (bx1 - bx0) : 0;
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">", bx0 - 4, y + bh * 0.7);
        esc(f, w->c->label);
        fprintf(f,
                "</text>\n<rect x=\"%.0f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                "fill=\"%s\"/>\n<text x=\"%.1f\" y=\"%.1f\">%.2f</text>\n",
                bx0, y + 1, len, bh - 2, color(w->c->family), bx0 + len + 3, y + bh * 0.7,
                w->dec_simd);
    }
}

/* left: unit-vector D_mse (log) against bits per value, with 4^-b and
 * 2.72 4^-b; right: decode GB/s on one core */
int bkv_write_svg(const bkv_result *r, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    const double W = 1000, H = 460, x0 = 70, x1 = 520, y0 = 40, y1 = 400, bmin = 1, bmax = 9,
                 lmin = -5, lmax = 0;
#define PX(b) (x0 + ((b)-bmin) / (bmax - bmin) * (x1 - x0))
#define PY(v) (y1 - (log10(v) - lmin) / (lmax - lmin) * (y1 - y0))
    fprintf(
        f,
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
        "width=\"%.0f\" "
        "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"11\">\n",
        W, H, W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f,
            "<text x=\"%.0f\" y=\"22\" font-size=\"13\">D_mse per unit vector (d = 128) vs bits "
            "per value</text>\n",
            x0);
    fprintf(f,
            "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
            "stroke=\"#999\"/>\n",
            x0, y0, x1 - x0, y1 - y0);
    for (int b = 1; b <= 9; b++)
        fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%d</text>\n", PX(b), y1 + 16,
                b);
    for (int e = -5; e <= 0; e++)
        fprintf(f,
                "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">1e%d</text>\n<line x1=\"%.0f\" "
                "x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n",
                x0 - 4, PY(pow(10, e)) + 4, e, x0, x1, PY(pow(10, e)), PY(pow(10, e)));
    fprintf(
        f,
        "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">bits per value (all overhead)</text>\n",
        (x0 + x1) / 2, y1 + 34);
    for (int k = 0; k < 2; k++) { /* the two bounds */
        fprintf(f, "<polyline fill=\"none\" stroke=\"#444\" stroke-dasharray=\"%s\" points=\"",
                k ? "6,3" : "2,2");
        for (double b = 1; b <= 8.01; b += 0.25) {
            double v = k ? UPPER(b) : LOWER(b);
            if (log10(v) >= lmin) fprintf(f, "%.1f,%.1f ", PX(b), PY(v));
        }
        fprintf(f, "\"/>\n<text x=\"%.1f\" y=\"%.1f\" fill=\"#444\">%s</text>\n", PX(k ? 2.6 : 1.2),
                PY(k ? UPPER(2.6) : LOWER(1.2)) + (k ? -6 : 14),
                k ? "upper 2.72 4^-b" : "lower 4^-b");
    }
    for (size_t i = 0; i < r->n_rows; i++) {
        const bkv_row *w = &r->rows[i];
        double b = w->bpv, v = w->unit_dmse;
        if (!(b >= bmin && b <= bmax) || !(v > 0) || log10(v) < lmin) continue;
        fprintf(f,
                "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>\n<text x=\"%.1f\" "
                "y=\"%.1f\" fill=\"%s\">",
                PX(b), PY(v), color(w->c->family), PX(b) + 6, PY(v) + 4 - 9.0 * (i % 2),
                color(w->c->family));
        esc(f, w->c->label);
        fprintf(f, "</text>\n");
    }
    svg_throughput_bars(f, r, y0, y1); /* right */
    fprintf(f, "</svg>\n");
    return fclose(f) ? -1 : 0;
#undef PX
#undef PY
}
