/* test_kv_prepare.c - one call from options to plan (formats/snapshot/kv_prepare.c):
 * automatic InnerQ says why it computed no scales; whether K will be transform-coded follows
 * the options; the CUDA rule is one for encoding and decoding.  (tq_kvsnap_encode against
 * encode-kvdump: test_kv_rotation.c, on a state whose rotation only the preparation finds.) */
#include "harness.h"
#include "kv_snapshot.h"
#include "model.h"

#include <stdlib.h>
#include <string.h>

enum { CELLS = 700, LAYERS = 2, WIDTH = 128 };

/* A view of a sequence file of CELLS cells, LAYERS layers of 2 heads of 64: Gaussian rows
 * (*bytes: the file, the view's to outlive), and o the default options. */
static tq_kv_view *open_state(tq_ctx *ctx, uint8_t **bytes, tq_kvsnap_options *o)
{
    tq_kvsnap_options_init(o);
    unsigned long long seed = 17;
    tq_test_seq seq = {CELLS, LAYERS, WIDTH, 1, 0, 100, tq_test_randn_value, &seed};
    size_t len;
    tq_kv_view *v = NULL;
    *bytes = tq_test_seq_state(&seq, &len);
    if (tq_kv_open_memory(ctx, *bytes, len, "s", TQ_PROFILE_DEFAULT, &v))
        tq_test_fail(__FILE__, __LINE__, " open: %s\n", tq_ctx_error(ctx));
    return v;
}

/* A llama model of no tensors with the state's shape: 2 layers, 2 heads of 64. */
static void make_model(tq_test_buf *b)
{
    tq_test_gguf_head(b, 5, "llama");
    tq_test_gguf_u32(b, "llama.block_count", LAYERS);
    tq_test_gguf_u32(b, "llama.embedding_length", WIDTH);
    tq_test_gguf_u32(b, "llama.attention.head_count", 2);
    tq_test_gguf_u32(b, "llama.attention.head_count_kv", 2);
    while (b->n % 32) tq_test_put(b, "", 1);
}

TEST(auto_innerq_says_why_it_computed_no_scales)
{
    tq_ctx *ctx = tq_ctx_new();
    uint8_t *s;
    tq_kvsnap_options o;
    tq_kv_view *v = open_state(ctx, &s, &o);
    CHECK(v != NULL);
    tq_innerq_set set;
    const char *why = NULL;
    CHECK_OK(ctx, tq_kvsnap_auto_innerq(ctx, v, &o, &set, &why));
    CHECK(set.s == NULL && !strcmp(why, "off"), "no model: '%s'", why);
    tq_test_buf mb;
    make_model(&mb);
    tq_gguf *g = NULL;
    tq_model model;
    CHECK_OK(ctx, tq_gguf_open_memory(ctx, mb.p, mb.n, "m.gguf", NULL, &g));
    CHECK_OK(ctx, tq_model_read(ctx, g, &model));
    o.model = &model;
    o.transform = TQ_TC_OFF; /* else a transform-coded K wants no scales */
    CHECK_OK(ctx, tq_kvsnap_auto_innerq(ctx, v, &o, &set, &why));
    CHECK(set.s == NULL && strstr(why, "no QK-norm gains") != NULL, "'%s'", why);
    tq_model_free(&model);
    tq_gguf_close(g);
    tq_kv_close(v);
    free(mb.p);
    free(s);
    tq_ctx_free(ctx);
}

TEST(k_transformed_follows_the_transform_option)
{
    tq_ctx *ctx = tq_ctx_new();
    uint8_t *s;
    tq_kvsnap_options o;
    tq_kv_view *v = open_state(ctx, &s, &o);
    CHECK(v != NULL);
    o.head_dim = 64;
    o.transform = TQ_TC_ON;
    CHECK_EQ(tq_kvsnap_k_transformed(&o, v), 1);
    o.transform = TQ_TC_OFF;
    CHECK_EQ(tq_kvsnap_k_transformed(&o, v), 0);
    o.transform = TQ_TC_ON;
    o.preset = TQ_KV_PRESET_LOSSLESS; /* nothing is coded */
    CHECK_EQ(tq_kvsnap_k_transformed(&o, v), 0);
    o.preset = TQ_KV_PRESET_BALANCED;
    o.codec = TQKV_CODEC_TURBO; /* the fork's blocks are not transform-coded */
    CHECK_EQ(tq_kvsnap_k_transformed(&o, v), 0);
    o.codec = TQKV_CODEC_TQ;
    o.k_rate = 0; /* no rate for K: the transform is off for it */
    CHECK_EQ(tq_kvsnap_k_transformed(&o, v), 0);
    tq_kv_close(v);
    free(s);
    tq_ctx_free(ctx);
}

TEST(cuda_kernels_serve_tq_and_turbo_blocks_alone)
{
    tqkv_record t[2];
    memset(t, 0, sizeof t);
    tqkv_meta m = {.n_tensors = 2, .t = t};
    t[0].codec = TQKV_CODEC_TQ;
    t[1].codec = TQKV_CODEC_KLT;
    CHECK_EQ(tq_kvsnap_cuda_kernels(&m), 1);
    t[1].codec = TQKV_CODEC_ANGLE;
    CHECK_EQ(tq_kvsnap_cuda_kernels(&m), 0);
    t[1].codec = TQKV_CODEC_PROD;
    CHECK_EQ(tq_kvsnap_cuda_kernels(&m), 0);
}
