/* test_kv_layers.c - which model layer each cache layer is: one cache maps
 * layer to layer; gemma3's two iSWA caches (every 6th layer global, base
 * cache first) and gpt-oss's (every 2nd) split as llama.cpp splits them;
 * counts that do not fit leave the map unknown; a snapshot's recorded model
 * layers win over the architecture's rule. */
#include "harness.h"
#include "kv_layers.h"

#include <stdlib.h>
#include <string.h>

TEST(kv_layers_split_like_llama_cpp)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_cache_layers L;
    uint32_t one[1] = {12};
    CHECK(tq_cache_layers_for(ctx, "llama", NULL, 1, one, &L) == TQ_OK && tq_cache_layers_known(&L));
    CHECK_EQ(tq_cache_layers_model(&L, 0, 7), 7);
    CHECK_EQ(tq_cache_layers_model(&L, 0, 12), TQ_KV_LAYER_UNKNOWN);
    tq_cache_layers_free(&L);
    uint32_t g3[2] = {3, 15};
    CHECK(tq_cache_layers_for(ctx, "gemma3", NULL, 2, g3, &L) == TQ_OK && tq_cache_layers_known(&L), "%s", tq_ctx_error(ctx));
    CHECK(tq_cache_layers_model(&L, 0, 0) == 5 && tq_cache_layers_model(&L, 0, 1) == 11 && tq_cache_layers_model(&L, 0, 2) == 17,
          "the base cache holds the global layers");
    CHECK(tq_cache_layers_model(&L, 1, 0) == 0 && tq_cache_layers_model(&L, 1, 4) == 4 && tq_cache_layers_model(&L, 1, 5) == 6 &&
              tq_cache_layers_model(&L, 1, 14) == 16,
          "the SWA cache the others, in order");
    CHECK(strstr(L.rule, "gemma3") != NULL, "%s", L.rule);
    tq_cache_layers_free(&L);
    uint32_t g2[2] = {13, 13}; /* gpt-oss: every 2nd layer global, set in llama.cpp's code */
    CHECK(tq_cache_layers_for(ctx, "gpt-oss", NULL, 2, g2, &L) == TQ_OK);
    CHECK_EQ(tq_cache_layers_model(&L, 0, 0), 1);
    CHECK_EQ(tq_cache_layers_model(&L, 1, 0), 0);
    CHECK_EQ(tq_cache_layers_model(&L, 1, 12), 24);
    tq_cache_layers_free(&L);
    /* gemma2's row is not verified through llama.cpp (arch.c, column ok): its rule unused */
    CHECK(tq_cache_layers_for(ctx, "gemma2", NULL, 2, g2, &L) == TQ_OK && !tq_cache_layers_known(&L),
          "an unverified architecture's split");
    tq_cache_layers_free(&L);
    uint32_t odd[2] = {4, 14}; /* not gemma3's split of 18 */
    CHECK(tq_cache_layers_for(ctx, "gemma3", NULL, 2, odd, &L) == TQ_OK && !tq_cache_layers_known(&L), "no model: unknown");
    tq_cache_layers_free(&L);
    CHECK(tq_cache_layers_for(ctx, "mystery", NULL, 2, g3, &L) == TQ_OK && !tq_cache_layers_known(&L), "an unknown architecture");
    tq_cache_layers_free(&L);
    /* a snapshot whose records carry model layers: those are what it says */
    tqkv_record t[4] = {{.kv_state = 0, .layer = 0, .model_layer = 3},
                        {.kv_state = 1, .layer = 0, .model_layer = 0},
                        {.kv_state = 1, .layer = 1, .model_layer = 1},
                        {.kv_state = 1, .layer = 2, .model_layer = 2}};
    tqkv_meta m = {.arch = "mystery", .n_tensors = 4, .t = t};
    CHECK(tq_cache_layers_of_snapshot(ctx, &m, NULL, &L) == TQ_OK && tq_cache_layers_known(&L), "%s", tq_ctx_error(ctx));
    CHECK_EQ(tq_cache_layers_model(&L, 0, 0), 3);
    CHECK_EQ(tq_cache_layers_model(&L, 1, 2), 2);
    tq_cache_layers_free(&L);
    tq_ctx_free(ctx);
}
