/* gguf-rewrite.c - test tool: reads a GGUF and writes it again through the
 * writer (all metadata, every tensor's bytes), as later subcommands will.
 * Options after the paths: a type-id profile name, "align=N" (sets
 * general.alignment), "tag" (adds a tq.test key) and "split=BYTES" (split
 * output), so tests can make copies whose bytes differ while the model stays
 * the same. */
#include "gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: gguf-rewrite IN.gguf OUT.gguf [PROFILE]\n");
        return 2;
    }
    tq_ctx *ctx = tq_ctx_new();
    tq_gguf_options opt = {TQ_PROFILE_DEFAULT, 0};
    unsigned align = 0;
    unsigned long long split = 0;
    int tag = 0;
    for (int i = 3; i < argc; i++) {
        if (!strncmp(argv[i], "align=", 6)) align = (unsigned)atoi(argv[i] + 6);
        else if (!strcmp(argv[i], "tag")) tag = 1;
        else if (!strncmp(argv[i], "split=", 6)) split = strtoull(argv[i] + 6, NULL, 10);
        else if (tq_type_profile_parse(argv[i], &opt.profile) == 0) opt.profile_explicit = 1;
    }
    tq_gguf *g;
    tq_gguf_writer *w;
    if (tq_gguf_open(ctx, argv[1], &opt, &g) || tq_gguf_writer_new(ctx, &w)) goto fail;
    if (tq_gguf_writer_copy_kvs(w, g) || tq_gguf_writer_set_profile(w, tq_gguf_profile(g))) goto fail;
    if (align && tq_gguf_writer_set_u32(w, "general.alignment", align)) goto fail;
    if (tag && tq_gguf_writer_set_str(w, "tq.test", "rewritten by tq", 15)) goto fail;
    if (split && tq_gguf_writer_set_split(w, split)) goto fail;
    for (int64_t i = 0; i < tq_gguf_n_tensors(g); i++)
        if (tq_gguf_writer_add_tensor(w, tq_gguf_tensor_name(g, i), tq_gguf_tensor_type_id(g, i),
                                      tq_gguf_tensor_n_dims(g, i), tq_gguf_tensor_ne(g, i)))
            goto fail;
    const char *in = argv[1];
    if (tq_gguf_writer_open(w, argv[2], &in, 1)) goto fail;
    for (int64_t i = 0; i < tq_gguf_n_tensors(g); i++)
        if (tq_gguf_writer_write(w, tq_gguf_tensor_data(g, i), tq_gguf_tensor_nbytes(g, i))) goto fail;
    if (tq_gguf_writer_finish(w)) goto fail;
    tq_gguf_writer_free(w);
    tq_gguf_close(g);
    tq_ctx_free(ctx);
    return 0;
fail:
    fprintf(stderr, "gguf-rewrite: %s\n", tq_ctx_error(ctx));
    return 1;
}
