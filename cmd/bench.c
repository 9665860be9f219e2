/* bench.c - `tq bench`: codec quality and speed on generated data.  Speed is
 * the median of repeated runs; the scalar reference and the SIMD path run in
 * the same process on the same data so their ratio is meaningful. */
#include "bench_measure.h"
#include "cli.h"
#include "cli_opts.h"
#include "gguf.h"
#include "json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct bench_opts {
    size_t values;
    int reps;
    int threads; /* for the all-cores column; 0 = all */
    int demo, json;
    int cuda;
    const char *which; /* kv (default) or weights */
    const char *kv, *model, *plot;
} bench_opts;

void help_bench(void)
{
    printf(
        "usage: tq bench [kv|weights] [--quick] [--kv FILE [--model M.gguf]] [--json] [--plot "
        "FILE.svg]\n"
        "                [--reps R] [--threads N]\n\n"
        "  kv       (default) every KV codec side by side on the same data: the TurboQuant family\n"
        "           (tq, turbo2/3/4, TurboAngle, TurboQuant-prod), ggml's q8_0/q4_0/q4_K..q6_K, "
        "f16\n"
        "           and zstd of f16.  Layer 1 reconstruction: bits per value with every overhead,\n"
        "           x f16, relative MSE, cosine, max error, D_mse of unit vectors beside the "
        "bounds\n"
        "           4^-b and 2.72 4^-b, the LARQL contract; layer 2 attention: softmax KL, output\n"
        "           cosine and top-8 overlap against exact attention, asymmetric K/V, boundary "
        "layers,\n"
        "           sparse V; layer 4 speed: encode/decode GB/s per core (scalar and SIMD) and on "
        "all\n"
        "           cores, medians after a warm-up, peak memory.  (Layer 3, model quality through\n"
        "           llama.cpp, is tests/bench/kv_model_quality.py.)\n"
        "  weights  TQ3_1S/TQ4_1S: relative error of the fork's search and tq's, M weights/s\n"
        "  --model M.gguf without --kv: every weight type on the model's own tensors\n\n"
        "  --kv FILE     real K/V: a llama.cpp state file, NumPy dump or .tqkv snapshot (queries:\n"
        "                the last cells' keys stand in); --model gives the head size\n"
        "  --quick       a few-second run on a smaller sample (also --demo)\n"
        "  --json        every figure and the machine as JSON on stdout\n"
        "  --plot F.svg  distortion vs bits per value with both bounds, and throughput bars\n"
        "  --reps R      repetitions per speed figure (default 5; --quick: 3)\n"
        "  --threads N   threads for the all-cores columns (default: all)\n"
        "  --values N    weights: values per run (default 4194304)\n\n"
        "--kv FILE may be - (a pipe) or s3://bucket/key (an object), with AWS_ACCESS_KEY_ID,\n"
        "AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION and AWS_ENDPOINT_URL from the\n"
        "environment; the model is a file (it is mapped).\n");
}

static int parse(int argc, char **argv, bench_opts *o)
{
    long values = 0, reps = 0;
    int quick = 0;
    const cli_opt own[] = {
        CLI_OPT_FLAG("--demo", &o->demo),     CLI_OPT_FLAG("--quick", &quick),
        CLI_OPT_FLAG("--cuda", &o->cuda),     CLI_OPT_LONG("--values", &values, 4096, 1L << 30),
        CLI_OPT_LONG("--reps", &reps, 1, 64), CLI_OPT_STR("--kv", &o->kv),
        CLI_OPT_STR("--plot", &o->plot),      {NULL},
    };
    const cli_spec spec = {"bench", CLI_THREADS | CLI_JSON | CLI_MODEL | CLI_DEVICE, own, 1};
    cli_common c;
    int n = 0, rc = cli_parse(&spec, argc, argv, &c, &o->which, &n);
    if (rc) return rc;
    if (c.device && !strcmp(c.device, "cuda")) { /* the CUDA rows beside the CPU's */
        if (tq_cuda_devices() < 1)
            return cli_runtime_error("--device cuda: %s", tq_cuda_built()
                                                              ? "no CUDA device is visible"
                                                              : "this tq was built without CUDA");
        o->cuda = 1;
    }
    if (c.device && !strcmp(c.device, "cpu") && o->cuda)
        return cli_usage_error("--cuda with --device cpu: choose one");
    if (!o->which || !strcmp(o->which, "codec")) o->which = "kv";
    if (strcmp(o->which, "kv") && strcmp(o->which, "weights"))
        return cli_usage_error("unknown bench '%s': kv or weights (see tq help bench)", o->which);
    o->demo |= quick;
    o->json = c.json;
    o->model = c.model;
    o->threads = (int)c.threads;
    o->values = (size_t)values;
    o->reps = (int)reps;
    if (!o->values) o->values = o->demo ? (1u << 20) : (1u << 22);
    if (!o->reps) o->reps = o->demo ? 3 : 5;
    o->values -= o->values % 512;
    if (o->cuda) /* the weights bench never timed a GPU: say so rather than run on the CPU */
        return cli_usage_error("--cuda: the %s bench measures the CPU's kernels (the CUDA "
                               "kernels' speed: tests/device)",
                               o->which);
    return 0;
}

/* ------------------------------------------------------------ the KV report */

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

static void bkv_print_table(const bkv_result *r)
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

static void jnum(json_t *obj, const char *k, double v)
{
    json_object_set_new(obj, k, json_num(v, 6));
}

static void jattn(json_t *obj, const battn *a)
{
    jnum(obj, "attn_kl", a->kl);
    jnum(obj, "attn_out_cosine", a->out_cos);
    jnum(obj, "top8_overlap", a->topk);
}

static json_t *bkv_json_row(const bkv_row *w)
{
    const char *l = larql(w);
    json_t *o = json_object();
    json_object_set_new(o, "name", json_text(w->c->label));
    json_object_set_new(o, "family", json_text(w->c->family));
    jnum(o, "nominal_bits", w->c->nominal_bits);
    jnum(o, "bits_per_value", w->bpv);
    jnum(o, "ratio_fp16", 16 / w->bpv);
    jnum(o, "rel_mse", w->rel_mse);
    jnum(o, "cosine", w->cosine);
    jnum(o, "max_abs_error", w->max_err);
    jnum(o, "unit_dmse", w->unit_dmse);
    jnum(o, "unit_cosine", w->unit_cos);
    json_object_set_new(o, "larql", l ? json_text(l) : json_null());
    jattn(o, &w->attn);
    jnum(o, "encode_gbps", w->enc_simd);
    jnum(o, "decode_gbps", w->dec_simd);
    jnum(o, "encode_gbps_scalar", w->enc_scalar);
    jnum(o, "decode_gbps_scalar", w->dec_scalar);
    jnum(o, "encode_gbps_all", w->enc_all);
    jnum(o, "decode_gbps_all", w->dec_all);
    jnum(o, "encode_spread", w->enc_spread);
    jnum(o, "decode_spread", w->dec_spread);
    jnum(o, "ip_bias", w->ip_bias);
    jnum(o, "ip_variance", w->ip_var);
    if (!strcmp(w->c->family, "prod")) /* the paper's bound for unit x and y, d = 128 */
        jnum(o, "ip_variance_bound", sqrt(3.0) * M_PI * M_PI / 128 * pow(4.0, -(double)w->c->bits));
    jnum(o, "scores_gbps", w->scores_gbps);
    jnum(o, "decode_dot_gbps", w->decode_dot_gbps);
    json_object_set_new(o, "heads", json_integer((json_int_t)w->heads));
    json_object_set_new(o, "heads_skipped", json_integer((json_int_t)w->heads_skipped));
    json_object_set_new(o, "bytes", json_integer((json_int_t)w->bytes));
    json_object_set_new(o, "values", json_integer((json_int_t)w->values));
    return o;
}

static int bkv_print_json(const bkv_result *r)
{
    static const char *const own_line[] = {"machine", "codecs",    "theory", "pairs",
                                           "angle_histogram_kl", "speed", NULL};
    static const char *const rows[] = {"codecs", NULL};
    char cpu[256];
    cpu_name(cpu, sizeof cpu);
    json_t *doc = json_object();
    json_object_set_new(doc, "workload", json_text(r->workload));
    json_t *machine = json_object();
    json_object_set_new(machine, "cpu", json_text(cpu));
    json_object_set_new(machine, "cores", json_integer(sysconf(_SC_NPROCESSORS_ONLN)));
    json_object_set_new(machine, "simd", json_text(tq_simd_name(tq_simd_best())));
    json_object_set_new(machine, "threads", json_integer(r->threads));
    json_object_set_new(doc, "machine", machine);
    json_t *codecs = json_array();
    for (size_t i = 0; i < r->n_rows; i++) json_array_append_new(codecs, bkv_json_row(&r->rows[i]));
    json_object_set_new(doc, "codecs", codecs);
    json_t *theory = json_array();
    for (int b = 1; b <= 4; b++) {
        json_t *t = json_object();
        json_object_set_new(t, "bits", json_integer(b));
        jnum(t, "dmse", r->theory_dmse[b - 1]);
        jnum(t, "measured", r->theory_measured[b - 1]);
        jnum(t, "lower", LOWER(b));
        jnum(t, "upper", UPPER(b));
        json_array_append_new(theory, t);
    }
    json_object_set_new(doc, "theory", theory);
    json_t *pairs = json_array();
    for (size_t i = 0; i < r->n_pairs; i++) {
        json_t *p = json_object();
        json_object_set_new(p, "what", json_text(r->pairs[i].what));
        jnum(p, "bits_per_value", r->pairs[i].bpv);
        jattn(p, &r->pairs[i].attn);
        jnum(p, "skipped", r->pairs[i].attn.skipped);
        json_array_append_new(pairs, p);
    }
    json_object_set_new(doc, "pairs", pairs);
    json_t *angles = json_object();
    jnum(angles, "raw", r->angle_kl_raw);
    jnum(angles, "rotated", r->angle_kl_rotated);
    json_object_set_new(doc, "angle_histogram_kl", angles);
    json_t *speed = json_object();
    json_object_set_new(speed, "values", json_integer((json_int_t)r->speed_values));
    json_object_set_new(speed, "reps", json_integer(r->reps));
    json_object_set_new(speed, "threads", json_integer(r->threads));
    json_object_set_new(doc, "speed", speed);
    jnum(doc, "peak_rss_mb", r->peak_mb);
    jnum(doc, "seconds", r->seconds);
    json_layout layout = {own_line, rows, 0};
    return json_write_report(stdout, doc, &layout) ? cli_runtime_error("stdout: write failed") : 0;
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
static int bkv_write_svg(const bkv_result *r, const char *path)
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

/* ------------------------------------------------------------ weights */

/* The same figures as JSON (through jansson). */
static int print_generated_json(const bench_opts *o, const bwt_row *rows)
{
    json_t *codecs = json_array();
    for (int i = 0; i < 2; i++) {
        const bwt_row *r = &rows[i];
        json_t *row = json_object();
        json_object_set_new(row, "type", json_text(r->name));
        json_object_set_new(row, "bits", json_num(r->bits, 6));
        json_object_set_new(row, "rel_mse_fork", json_num(r->rel_mse_fork, 6));
        json_object_set_new(row, "rel_mse_tq", json_num(r->rel_mse_best, 6));
        json_object_set_new(row, "encode_mws_fork", json_num(r->enc_fork, 6));
        json_object_set_new(row, "encode_mws_tq", json_num(r->enc_simd, 6));
        json_object_set_new(row, "decode_mws_scalar", json_num(r->dec_scalar, 6));
        json_object_set_new(row, "decode_mws_simd", json_num(r->dec_simd, 6));
        json_object_set_new(row, "encode_mws_all_cores", json_num(r->enc_all, 6));
        json_object_set_new(row, "decode_mws_all_cores", json_num(r->dec_all, 6));
        json_array_append_new(codecs, row);
    }
    json_t *doc = json_object();
    json_object_set_new(doc, "workload", json_text("gaussian weights with rare outliers"));
    json_object_set_new(doc, "values", json_integer((json_int_t)o->values));
    json_object_set_new(doc, "reps", json_integer(o->reps));
    json_object_set_new(doc, "simd", json_text(tq_simd_name(tq_simd_best())));
    json_object_set_new(doc, "codecs", codecs);
    return json_write(stdout, doc) ? cli_runtime_error("stdout: write failed") : 0;
}

static void print_generated(const bench_opts *o, const bwt_row *rows)
{
    printf("tq bench weights: %zu Gaussian weights with rare outliers, median of %d runs\n",
           o->values, o->reps);
    printf(
        "Mw/s = million weights per second, one core unless 'all'.  fork = the fork's search\n"
        "(bit-identical to quantize_row_tq4_1s_ref), scalar; tq = tq's search (per-half starts,\n"
        "scales picked against their fp16 value), %s; ref = the scalar decoder\n\n",
        tq_simd_name(tq_simd_best()));
    printf("%-8s %5s %11s %11s | %8s %8s %5s | %8s %8s %5s | %7s %7s\n", "type", "bits",
           "relmse fork", "relmse tq", "enc fork", "enc tq", "x", "dec ref", "dec simd", "x",
           "enc all", "dec all");
    for (int i = 0; i < 2; i++) {
        const bwt_row *r = &rows[i];
        printf("%-8s %5.2f %11.6f %11.6f | %8.1f %8.1f %5.1f | %8.1f %8.1f %5.1f | %7.1f %7.1f\n",
               r->name, r->bits, r->rel_mse_fork, r->rel_mse_best, r->enc_fork, r->enc_simd,
               r->enc_simd / r->enc_fork, r->dec_scalar, r->dec_simd, r->dec_simd / r->dec_scalar,
               r->enc_all, r->dec_all);
    }
}

/* The model's weight codecs as JSON (tq's one JSON writer). */
static int print_model_weights_json(const char *path, const bwt_model_result *w)
{
    static const char *const rows[] = {"codecs", NULL};
    json_t *doc = json_object();
    json_object_set_new(doc, "model", json_text(path));
    json_object_set_new(doc, "tensors", json_integer(w->used));
    json_object_set_new(doc, "weights", json_num(w->total, 15));
    json_t *codecs = json_array();
    for (int c = 0; c < BWT_MODEL_CODECS; c++) {
        json_t *o = json_object();
        json_object_set_new(o, "name", json_text(w->name[c]));
        json_object_set_new(o, "bits_per_weight", json_num(w->bits[c], 6));
        json_object_set_new(o, "rel_error", json_num(w->rel_error[c], 6));
        json_object_set_new(o, "encode_mws", json_num(w->encode_mws[c], 6));
        json_array_append_new(codecs, o);
    }
    json_object_set_new(doc, "codecs", codecs);
    json_layout layout = {NULL, rows, 0};
    return json_write_report(stdout, doc, &layout) ? cli_runtime_error("stdout: write failed") : 0;
}

static int print_model_weights(const char *path, const bwt_model_result *w, int reps, int json)
{
    if (json) return print_model_weights_json(path, w);
    printf("tq bench --model %s: %d weight matrices (their first %zu values each, %.0f "
           "weights), coded from\n"
           "their dequantized values (so a type a tensor already has is favoured); speed: one "
           "core, median of\n"
           "%d\n\n%-22s %8s %11s %12s\n",
           path, w->used, w->cap, w->total, reps, "type", "bits/w", "rel. error", "encode Mw/s");
    for (int c = 0; c < BWT_MODEL_CODECS; c++)
        printf("%-22s %8.3f %11.3e %12.1f\n", w->name[c], w->bits[c], w->rel_error[c],
               w->encode_mws[c]);
    return 0;
}

/* ------------------------------------------------------------ runs */

/* `tq bench weights`: the fork's weight codecs on generated weights. */
static int run_generated(tq_ctx *ctx, const bench_opts *o)
{
    bwt_opts w = {o->values, o->reps, o->threads};
    bwt_row rows[2];
    if (bwt_generated(ctx, &w, rows)) return cli_lib_error(ctx);
    if (o->json) return print_generated_json(o, rows);
    print_generated(o, rows);
    return 0;
}

/* `tq bench --model M.gguf`: every weight type on the model's tensors. */
static int run_model_weights(tq_ctx *ctx, const bench_opts *o)
{
    tq_gguf *g = NULL;
    if (tq_gguf_open(ctx, o->model, NULL, &g)) return cli_lib_error(ctx);
    bwt_model_result res;
    int rc = 0;
    if (bwt_model(ctx, g, o->demo, o->reps, &res))
        rc = cli_runtime_error("%s: %s", o->model, tq_ctx_error(ctx));
    else
        rc = print_model_weights(o->model, &res, o->reps, o->json);
    tq_gguf_close(g);
    return rc;
}

/* `tq bench kv`: the four layers for every KV codec, then the table or JSON and the plot. */
static int run_kv(tq_ctx *ctx, const bench_opts *o)
{
    tq_gguf *g = NULL;
    tq_model model = {0};
    if (o->model && (tq_gguf_open(ctx, o->model, NULL, &g) || tq_model_read(ctx, g, &model))) {
        tq_gguf_close(g);
        return cli_lib_error(ctx);
    }
    bkv_opts k = {o->demo, o->reps, o->threads, o->kv};
    bkv_result res;
    tq_status st = bkv_measure(ctx, &k, g ? &model : NULL, &res);
    tq_model_free(&model);
    tq_gguf_close(g);
    if (st) return cli_lib_error(ctx);
    int rc = 0;
    if (o->json)
        rc = bkv_print_json(&res);
    else
        bkv_print_table(&res);
    if (o->plot && bkv_write_svg(&res, o->plot))
        rc = cli_runtime_error("%s: cannot write the plot", o->plot);
    bkv_result_free(&res);
    return rc;
}

int cmd_bench(int argc, char **argv)
{
    bench_opts o = {0};
    int rc = parse(argc, argv, &o);
    if (rc) return rc < 0 ? TQ_EXIT_OK : rc;
    tq_ctx *ctx = tq_ctx_new();
    if (!ctx) return cli_runtime_error("out of memory");
    if (!strcmp(o.which, "weights") && !o.model)
        rc = run_generated(ctx, &o);
    else if (o.model && !o.kv)
        rc = run_model_weights(ctx, &o);
    else
        rc = run_kv(ctx, &o);
    tq_ctx_free(ctx);
    return rc;
}
