/* test_kv_view.c - the KV front door: each source bids on the bytes it
 * knows (state files, .npy, .npz including the empty zip, NumPy images), the
 * winner opens the view, and bytes nobody claims get the state reader's
 * precise refusal. */
#include "harness.h"
#include "kv_view.h"

#include <string.h>

TEST(kv_probe_names_each_source)
{
    static const struct {
        const char *bytes;
        size_t n;
        const char *want;
    } cases[] = {
        {"nsgg\x09\0\0\0\0\0\0\0", 12, "llama.cpp state"},
        {"qsgg\x02\0\0\0\0\0\0\0", 12, "llama.cpp state"},
        {"\x93NUMPY\x01\0", 8, "NumPy"},
        {"PK\x03\x04\0\0\0\0", 8, "NumPy"},
        {"PK\x05\x06\0\0\0\0", 8, "NumPy"}, /* an empty .npz */
        {"TQNI\x01\0\0\0", 8, "NumPy"},     /* the image a snapshot decodes to */
        {"GGUF\x03\0\0\0", 8, NULL},
        {"TQKV\x01\0\0\0", 8, NULL},
        {"ns", 2, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *got = tq_kv_view_probe(cases[i].bytes, cases[i].n);
        CHECK(cases[i].want ? got && !strcmp(got, cases[i].want) : !got, "case %zu: %s", i, got ? got : "(none)");
    }
}

TEST(kv_front_door_opens_and_refuses)
{
    size_t len;
    uint8_t *seed = NULL;
    FILE *f = fopen("tests/fuzz/seeds/fuzz_state_read/stories16.ggsq", "rb");
    CHECK(f, "the committed seed state");
    seed = malloc(1 << 20);
    len = fread(seed, 1, 1 << 20, f);
    fclose(f);
    tq_ctx *ctx = tq_ctx_new();
    tq_kv_view *v;
    CHECK(tq_kv_view_open_memory(ctx, seed, len, "s", TQ_PROFILE_DEFAULT, &v) == TQ_OK, "%s", tq_ctx_error(ctx));
    CHECK(!strcmp(tq_kv_view_format(v), "llama.cpp state") && tq_kv_view_kind(v) == TQ_KV_SEQUENCE &&
          tq_kv_view_n_tokens(v) == 16);
    tq_kv_view_close(v);
    CHECK(tq_kv_view_open_memory(ctx, "GGUF\x03\0\0\0\0\0\0\0\0\0\0\0", 16, "m.gguf", TQ_PROFILE_DEFAULT, &v) == TQ_ERR_FORMAT &&
          strstr(tq_ctx_error(ctx), "m.gguf: not a llama.cpp state file"), "%s", tq_ctx_error(ctx));
    CHECK(tq_kv_view_open_memory(ctx, "PK\x05\x06", 4, "e.npz", TQ_PROFILE_DEFAULT, &v) != TQ_OK &&
          strstr(tq_ctx_error(ctx), "e.npz"), "a cut zip: %s", tq_ctx_error(ctx));
    free(seed);
    tq_ctx_free(ctx);
}
