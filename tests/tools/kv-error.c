/* kv-error.c - demo and bench tool: how far one llama.cpp state file's K and V are from
 * another's of the same layout (a decoded snapshot against its source): relative squared error
 * (sum of squared differences over sum of squares) of all K and of all V, one line.
 * usage: kv-error SOURCE DECODED */
#include "kv_view.h"

#include <stdio.h>
#include <stdlib.h>

/* sums over every tensor of one kind (K: is_v 0) of both views */
static int add_errors(tq_ctx *ctx, const tq_kv_view *a, const tq_kv_view *b, int is_v,
                      double *err, double *energy)
{
    for (uint32_t s = 0; s < tq_kv_view_n_kv(a); s++) {
        const tq_kv_state *sa = tq_kv_view_kv(a, s), *sb = tq_kv_view_kv(b, s);
        for (uint32_t j = 0; j < sa->n_stream; j++) {
            const tq_kv_stream *ta = &sa->streams[j], *tb = &sb->streams[j];
            for (uint32_t l = 0; l < ta->n_layer; l++) {
                const tq_kv_tensor *x = is_v ? &ta->v[l] : &ta->k[l];
                const tq_kv_tensor *y = is_v ? &tb->v[l] : &tb->k[l];
                size_t n = (size_t)ta->cell_count * x->width;
                float *rx = malloc(n * sizeof *rx + 4), *ry = malloc(n * sizeof *ry + 4);
                int bad = !rx || !ry ||
                          tq_kv_view_read_rows(ctx, x, ta->cell_count, 0, ta->cell_count, rx) ||
                          tq_kv_view_read_rows(ctx, y, tb->cell_count, 0, tb->cell_count, ry);
                for (size_t i = 0; !bad && i < n; i++) {
                    *err += ((double)rx[i] - ry[i]) * ((double)rx[i] - ry[i]);
                    *energy += (double)rx[i] * rx[i];
                }
                free(rx);
                free(ry);
                if (bad) return -1;
            }
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: kv-error SOURCE DECODED\n");
        return 2;
    }
    tq_ctx *ctx = tq_ctx_new();
    tq_kv_view *a = NULL, *b = NULL;
    if (tq_kv_view_open(ctx, argv[1], TQ_PROFILE_DEFAULT, &a) ||
        tq_kv_view_open(ctx, argv[2], TQ_PROFILE_DEFAULT, &b)) {
        fprintf(stderr, "kv-error: %s\n", tq_ctx_error(ctx));
        return 1;
    }
    if (tq_kv_view_kv_values(a) != tq_kv_view_kv_values(b)) {
        fprintf(stderr, "kv-error: the two files hold different K/V shapes\n");
        return 1;
    }
    double ek = 0, sk = 0, ev = 0, sv = 0;
    if (add_errors(ctx, a, b, 0, &ek, &sk) || add_errors(ctx, a, b, 1, &ev, &sv)) {
        fprintf(stderr, "kv-error: %s\n", tq_ctx_error(ctx));
        return 1;
    }
    printf("relative squared error: K %.5f, V %.5f\n", sk > 0 ? ek / sk : 0.0,
           sv > 0 ? ev / sv : 0.0);
    tq_kv_view_close(a);
    tq_kv_view_close(b);
    tq_ctx_free(ctx);
    return 0;
}
