/* bench_kv.h - `tq bench kv`: the four benchmark layers for every KV codec
 * (cmd/bench_kv.c runs them, cmd/bench_report.c prints them). */
#ifndef TQ_BENCH_KV_H
#define TQ_BENCH_KV_H

#include "bench.h"

typedef struct bkv_opts {
    int quick, json, reps, threads;
    const char *kv, *model, *plot;
} bkv_opts;

/* One codec's figures (NAN where not measured). */
typedef struct bkv_row {
    const bcodec *c;
    uint64_t bytes, values; /* over the heads it could take */
    size_t heads, heads_skipped;
    double bpv, rel_mse, cosine, max_err;
    double unit_dmse, unit_cos; /* random unit vectors, d = 128 */
    double ip_bias, ip_var;     /* <y, x^> - <y, x> for unit x and unit y: mean and variance */
    double scores_gbps,
        decode_dot_gbps; /* q.k for every key from the blocks vs decode then dot (one core) */
    battn attn;
    /* GB/s of float32, medians; spread = (max - min) / median over the repetitions */
    double enc_scalar, enc_simd, enc_all, dec_scalar, dec_simd, dec_all, enc_spread, dec_spread;
} bkv_row;

typedef struct bkv_pair { /* layer 2 extras: K and V with different codecs, boundary layers, sparse
                             V */
    char what[96];
    double bpv;
    battn attn;
} bkv_pair;

typedef struct bkv_result {
    char workload[200];
    bkv_row *rows;
    size_t n_rows;
    bkv_pair pairs[8];
    size_t n_pairs;
    double theory_dmse[4], theory_measured[4]; /* b = 1..4, d = 128 */
    double angle_kl_rotated, angle_kl_raw;     /* 256-bin histogram of pair angles vs uniform */
    size_t speed_values;
    int reps, threads;
    double peak_mb, seconds;
} bkv_result;

int bench_kv(const bkv_opts *o);
/* `tq bench --model M.gguf` alone: weight codecs on the model's tensors (cmd/bench_weights_model.c)
 */
int bench_model_weights(const char *path, int quick, int json, int reps);
/* cmd/bench_report.c */
void bkv_print_table(const bkv_result *r);
void bkv_print_json(const bkv_result *r);
int bkv_write_svg(const bkv_result *r, const char *path);

#endif
