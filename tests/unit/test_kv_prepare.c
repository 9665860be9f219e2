/* test_kv_prepare.c - one call from options to plan (formats/snapshot/kv_prepare.c):
 * automatic InnerQ says why it computed no scales; whether K will be transform-coded follows
 * the options; the CUDA rule is one for encoding and decoding.  (tq_kvsnap_encode against
 * encode-kvdump: test_kv_rotation.c, on a state whose rotation only the preparation finds.) */
#include "harness.h"
#include "kv_presets.h"
#include "kv_snapshot.h"
#include "model.h"

#include <stdlib.h>
#include <string.h>

enum { CELLS = 700, LAYERS = 2, WIDTH = 128 };

/* One test's state: a view of a sequence file of CELLS cells, LAYERS layers of 2 heads of 64
 * (Gaussian rows), the default options, and a llama model of no tensors with that shape. */
typedef struct {
    tq_ctx *ctx;
    uint8_t *bytes; /* the sequence file, the view's to outlive */
    tq_kv_view *view;
    tq_test_enc options;
    tq_test_buf model_bytes;
    tq_gguf *gguf;
    tq_model model;
} state;

static void state_open(state *s)
{
    memset(s, 0, sizeof *s);
    s->ctx = tq_ctx_new();
    s->options = (tq_test_enc)TQ_TEST_ENC_INIT;
    unsigned long long seed = 17;
    tq_test_seq seq = {CELLS, LAYERS, WIDTH, 1, 0, 100, tq_test_randn_value, &seed};
    size_t len;
    s->bytes = tq_test_seq_state(&seq, &len);
    if (tq_kv_view_open_memory(s->ctx, s->bytes, len, "s", TQ_PROFILE_DEFAULT, &s->view))
        tq_test_fail(__FILE__, __LINE__, " open: %s\n", tq_ctx_error(s->ctx));
    tq_test_gguf_head(&s->model_bytes, 5, "llama");
    tq_test_gguf_u32(&s->model_bytes, "llama.block_count", LAYERS);
    tq_test_gguf_u32(&s->model_bytes, "llama.embedding_length", WIDTH);
    tq_test_gguf_u32(&s->model_bytes, "llama.attention.head_count", 2);
    tq_test_gguf_u32(&s->model_bytes, "llama.attention.head_count_kv", 2);
    while (s->model_bytes.n % 32) tq_test_put(&s->model_bytes, "", 1);
    if (tq_gguf_open_memory(s->ctx, s->model_bytes.p, s->model_bytes.n, "m.gguf", NULL, &s->gguf) ||
        tq_model_read(s->ctx, s->gguf, &s->model))
        tq_test_fail(__FILE__, __LINE__, " model: %s\n", tq_ctx_error(s->ctx));
}

static void state_close(state *s)
{
    tq_model_free(&s->model);
    tq_gguf_close(s->gguf);
    tq_kv_view_close(s->view);
    free(s->model_bytes.p);
    free(s->bytes);
    tq_ctx_free(s->ctx);
}

/* What automatic InnerQ says of the state under the options. */
static const char *auto_innerq_why(state *s, tq_innerq_set *set)
{
    const char *why = "(not run)";
    tq_kvsnap_settings resolved;
    if (tq_kvsnap_resolve(s->ctx, &s->options.q, &s->options.in, &s->options.run, &resolved) ||
        tq_kvsnap_auto_innerq(s->ctx, s->view, &resolved, set, &why))
        why = tq_ctx_error(s->ctx);
    return why;
}

/* Each reason automatic InnerQ gives for no scales, in the order it asks: no model, a codec
 * whose blocks take none, no QK-norm gains (the test model has none).  (Scales the plan drops
 * from every K, all transform-coded: tests/oracle/kv_long_gemma.py, on Gemma's gains.) */
TEST(auto_innerq_says_why_it_computes_no_scales)
{
    state s;
    state_open(&s);
    struct {
        int with_model;
        int codec;
        const char *why;
    } cases[] = {
        {0, TQ_KVSNAP_UNSET, "off"},
        {1, TQKV_CODEC_TURBO, "off"},
        {1, TQ_KVSNAP_UNSET, "off (the model has no QK-norm gains: E[q^2] would be a guess)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        s.options.in.model = cases[i].with_model ? &s.model : NULL;
        s.options.q.codec = cases[i].codec;
        tq_innerq_set set;
        const char *why = auto_innerq_why(&s, &set);
        CHECK(set.s == NULL, "case %zu: scales computed (%s)", i, why);
        CHECK_EQ_STR(why, cases[i].why);
    }
    state_close(&s);
}

/* The plan's own choice, not an estimate: forced on, off, and the codecs and presets that
 * take no transform. */
TEST(prepare_resolves_the_request_once_and_leaves_it_as_asked)
{
    state s;
    state_open(&s);
    tq_kvsnap_prepared *prep = NULL;
    s.options.q.preset = TQ_KVSNAP_PRESET_LOSSLESS;
    s.options.q.past_bits = 2; /* not with lossless: refused before anything is made */
    CHECK_STATUS(s.ctx, tq_kvsnap_prepare(s.ctx, s.view, &s.options.q, &s.options.in,
                                          &s.options.run, &prep),
                 TQ_ERR_ARG);
    CHECK(prep == NULL, "a prepared snapshot of a refused request");
    s.options.q = (tq_kvsnap_request)TQ_KVSNAP_REQUEST_INIT;
    const tq_kvsnap_request asked = s.options.q;
    CHECK_OK(s.ctx, tq_kvsnap_prepare(s.ctx, s.view, &s.options.q, &s.options.in,
                                      &s.options.run, &prep));
    CHECK(prep && prep->plan, "no plan");
    const tq_kvsnap_settings *set = &prep->plan->settings;
    CHECK(set->row && set->sink_cells != TQ_KVSNAP_UNSET && set->k_bits > 0 &&
              set->zstd_level != TQ_KVSNAP_UNSET,
          "unresolved: row %p, sink cells %d, K bits %d, zstd %d", (const void *)set->row,
          set->sink_cells, set->k_bits, set->zstd_level);
    CHECK(!memcmp(&asked, &s.options.q, sizeof asked), "the request changed after mapping");
    tq_kvsnap_prepared_free(prep);
    state_close(&s);
}

TEST(k_transformed_is_the_plans_choice)
{
    state s;
    state_open(&s);
    struct {
        tq_kvsnap_preset preset;
        int codec;
        int transform;
        int k_transformed;
    } cases[] = {
        {TQ_KVSNAP_PRESET_BALANCED, TQKV_CODEC_TQ, TQ_TC_ON, 1},
        {TQ_KVSNAP_PRESET_BALANCED, TQKV_CODEC_TQ, TQ_TC_OFF, 0},
        {TQ_KVSNAP_PRESET_LOSSLESS, TQKV_CODEC_TQ, TQ_TC_AUTO, 0},
        {TQ_KVSNAP_PRESET_BALANCED, TQKV_CODEC_TURBO, TQ_TC_AUTO, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        s.options.q.preset = cases[i].preset;
        s.options.q.codec = cases[i].codec;
        s.options.q.transform = cases[i].transform;
        tq_kvsnap_prepared *prep = NULL;
        CHECK_OK(s.ctx, tq_kvsnap_prepare(s.ctx, s.view, &s.options.q, &s.options.in,
                                          &s.options.run, &prep));
        CHECK_EQ(tq_kvsnap_k_transformed(prep->plan), cases[i].k_transformed);
        tq_kvsnap_prepared_free(prep);
    }
    state_close(&s);
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
