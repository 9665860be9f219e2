/* test_model.c - a model's facts read once (formats/model/model.c): llama.cpp's defaults where
 * keys are absent, the architecture table's RoPE facts, the sliding window and its pattern,
 * and refusals of counts out of range. */
#include "harness.h"
#include "model.h"

#include <stdlib.h>
#include <string.h>

static void put_f32(tq_test_buf *b, const char *key, float v)
{
    tq_test_gguf_str(b, key);
    tq_test_u32(b, TQ_GGUF_FLOAT32);
    tq_test_put(b, &v, 4);
}

/* A GGUF of no tensors: general.architecture, then n_u32 keys key=value, then n_f32 of floats. */
static tq_gguf *model_of(tq_ctx *ctx, tq_test_buf *b, const char *arch, int n_u32,
                         const char *const *u32_keys, const uint32_t *u32_values, int n_f32,
                         const char *const *f32_keys, const float *f32_values)
{
    tq_test_gguf_head(b, 1 + (uint64_t)n_u32 + (uint64_t)n_f32, arch);
    for (int i = 0; i < n_u32; i++) tq_test_gguf_u32(b, u32_keys[i], u32_values[i]);
    for (int i = 0; i < n_f32; i++) put_f32(b, f32_keys[i], f32_values[i]);
    while (b->n % 32) tq_test_put(b, "", 1);
    tq_gguf *g = NULL;
    if (tq_gguf_open_memory(ctx, b->p, b->n, "m.gguf", NULL, &g))
        tq_test_fail(__FILE__, __LINE__, " model: %s\n", tq_ctx_error(ctx));
    return g;
}

TEST(model_read_takes_llama_cpp_defaults_where_keys_are_absent)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_test_buf b;
    const char *keys[] = {"llama.block_count", "llama.embedding_length",
                          "llama.attention.head_count", "llama.attention.head_count_kv"};
    const uint32_t values[] = {30, 576, 9, 3};
    tq_gguf *g = model_of(ctx, &b, "llama", 4, keys, values, 0, NULL, NULL);
    tq_model m;
    CHECK_OK(ctx, tq_model_read(ctx, g, &m));
    CHECK_EQ(strcmp(m.arch, "llama"), 0);
    CHECK(m.row != NULL);
    CHECK_EQ(m.row->rope, TQ_PAIRS_ADJACENT);
    CHECK_EQ(m.n_layer, 30);
    CHECK_EQ(m.n_head_kv, 3);
    CHECK_EQ(m.head_k, 64); /* 576 / 9: no key_length */
    CHECK_EQ(m.head_v, 64);
    CHECK_EQ(m.n_rot, 64); /* no rope.dimension_count: the head */
    CHECK_EQ(m.swa_window, 0);
    CHECK_EQ(m.rope_known, 1);
    CHECK_EQ_DBL(m.rope.freq_base, 10000.0f); /* no rope.freq_base */
    CHECK_EQ_DBL(m.rope.freq_scale, 1.0f);
    CHECK_EQ(m.fingerprint, tq_model_fingerprint(g));
    tq_model_free(&m);
    tq_gguf_close(g);
    free(b.p);
    tq_ctx_free(ctx);
}

TEST(model_read_gives_sliding_layers_the_tables_rope_base)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_test_buf b;
    const char *keys[] = {"gemma3.block_count", "gemma3.attention.head_count",
                          "gemma3.attention.key_length", "gemma3.attention.value_length",
                          "gemma3.attention.sliding_window"};
    const uint32_t values[] = {18, 4, 256, 256, 512};
    const char *fkeys[] = {"gemma3.rope.freq_base", "gemma3.rope.scale_linear"};
    const float fvalues[] = {1000000.0f, 8.0f};
    tq_gguf *g = model_of(ctx, &b, "gemma3", 5, keys, values, 2, fkeys, fvalues);
    tq_model m;
    CHECK_OK(ctx, tq_model_read(ctx, g, &m));
    CHECK_EQ(m.n_head_kv, 4); /* no head_count_kv: the head count */
    CHECK_EQ(m.head_k, 256);
    CHECK_EQ(m.swa_window, 512);
    CHECK_EQ(m.rope.pairs, TQ_PAIRS_HALVES);
    CHECK_EQ_DBL(m.rope.freq_base, 1000000.0f);
    CHECK_EQ_DBL(m.rope.freq_scale, 0.125f); /* linear scaling by 8 */
    CHECK_EQ(m.rope_swa_known, 1);
    CHECK_EQ_DBL(m.rope_swa.freq_base, 10000.0f); /* arch.c's table, unscaled */
    CHECK_EQ_DBL(m.rope_swa.freq_scale, 1.0f);
    tq_model_free(&m);
    tq_gguf_close(g);
    free(b.p);
    tq_ctx_free(ctx);
}

TEST(model_read_refuses_a_count_past_32_bits)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_test_buf b;
    tq_test_gguf_head(&b, 2, "llama");
    tq_test_gguf_str(&b, "llama.block_count");
    tq_test_u32(&b, TQ_GGUF_INT64);
    tq_test_u64(&b, (uint64_t)-5);
    while (b.n % 32) tq_test_put(&b, "", 1);
    tq_gguf *g = NULL;
    CHECK_OK(ctx, tq_gguf_open_memory(ctx, b.p, b.n, "m.gguf", NULL, &g));
    tq_model m;
    CHECK_EQ(tq_model_read(ctx, g, &m), TQ_ERR_FORMAT);
    CHECK(strstr(tq_ctx_error(ctx), "llama.block_count is -5") != NULL, "%s", tq_ctx_error(ctx));
    tq_model_free(&m);
    tq_gguf_close(g);
    free(b.p);
    tq_ctx_free(ctx);
}
