/* test_kv_plan.c - the snapshot plan and its preset table: each preset's
 * defaults, the options checked before any file is read, the one head-size
 * rule, and the one description of a record's coding. */
#include "harness.h"
#include "kv_plan.h"
#include "llama_state.h"
#include "tq_internal.h"

#include <string.h>


/* a sequence file: 20 cells, 2 layers, f16 rows of `width` values */
static uint8_t *make_state(uint32_t width, size_t *len)
{
    unsigned long long seed = 3;
    tq_test_seq s = {20, 2, width, 1, 0, 7, tq_test_randn_value, &seed};
    return tq_test_seq_state(&s, len);
}

typedef struct planned {
    tq_ctx *ctx;
    uint8_t *state;
    tq_kv_view *view;
    tq_kvsnap_prepared *prep;
    const tq_kvsnap_plan *plan; /* prep's */
    tq_status st;
} planned;

static planned plan_for(uint32_t width, const tq_test_enc *o)
{
    planned p = {tq_ctx_new(), NULL, NULL, NULL, NULL, TQ_OK};
    size_t len;
    p.state = make_state(width, &len);
    p.st = tq_kv_view_open_memory(p.ctx, p.state, len, "s", TQ_PROFILE_DEFAULT, &p.view);
    if (!p.st) p.st = tq_kvsnap_prepare(p.ctx, p.view, &o->q, &o->in, &o->run, &p.prep);
    p.plan = p.st ? NULL : p.prep->plan;
    return p;
}

/* The options of a preset with a head size given (0: found from the state). */
static tq_test_enc preset_options(tq_kvsnap_preset preset, int head_dim)
{
    tq_test_enc o = TQ_TEST_ENC_INIT;
    o.q.preset = preset;
    o.q.head_dim = head_dim;
    return o;
}

static void planned_free(planned *p)
{
    tq_kvsnap_prepared_free(p->prep);
    tq_kv_view_close(p->view);
    free(p->state);
    tq_ctx_free(p->ctx);
}

TEST(kv_preset_names_are_the_presets_in_order)
{
    const char *names[] = {"balanced", "lossless", "q8", "small"};
    const tq_kvsnap_preset presets[] = {TQ_KVSNAP_PRESET_BALANCED, TQ_KVSNAP_PRESET_LOSSLESS,
                                        TQ_KVSNAP_PRESET_Q8, TQ_KVSNAP_PRESET_SMALL};
    for (int i = 0; i < 4; i++) {
        CHECK_EQ_STR(tq_kvsnap_preset_names[presets[i]], names[i]);
        CHECK_EQ_STR(tq_kvsnap_preset_name(presets[i]), names[i]);
    }
    CHECK(tq_kvsnap_preset_names[4] == NULL);
}

TEST(kv_options_leave_the_head_size_to_the_model_unless_given)
{
    tq_test_enc o = TQ_TEST_ENC_INIT;
    CHECK_EQ(o.q.head_dim, 0);
}

TEST(kv_options_left_to_the_preset_take_its_row)
{
    tq_test_enc o = TQ_TEST_ENC_INIT;
    CHECK_EQ(o.q.sink_cells, TQ_KVSNAP_UNSET);
    planned p = plan_for(64, &o);
    CHECK_OK(p.ctx, p.st);
    CHECK_EQ(p.plan->settings.sink_cells, 1);
    CHECK_EQ(p.plan->settings.k_offset, TQ_KOFF_ROPE);
    CHECK_EQ(p.plan->settings.cells, TQ_CELLS_AUTO);
    CHECK_EQ(p.plan->settings.zstd_level, 1);
    CHECK_EQ(p.plan->settings.codec, TQKV_CODEC_TQ);
    planned_free(&p);
}

/* The bits a plan codes K and V with: the preset's, one more for heads of 32
 * values or less, and the user's where given. */
typedef struct {
    tq_kvsnap_preset preset;
    int head_dim;
    int k_bits_given;
    int k_bits;
    int v_bits;
} bits_case;

/* clang-format off */
static const bits_case bits_cases[] = {
    {TQ_KVSNAP_PRESET_BALANCED, 8,  TQ_KVSNAP_UNSET, 5, 4},
    {TQ_KVSNAP_PRESET_BALANCED, 64, TQ_KVSNAP_UNSET, 4, 4},
    {TQ_KVSNAP_PRESET_SMALL,    32, 6,                 6, 3},
};
/* clang-format on */

TEST(kv_plan_bits_come_from_the_preset_the_head_size_and_the_user)
{
    for (size_t i = 0; i < sizeof bits_cases / sizeof bits_cases[0]; i++) {
        tq_test_enc o = preset_options(bits_cases[i].preset, bits_cases[i].head_dim);
        o.q.k_bits = bits_cases[i].k_bits_given;
        planned p = plan_for(64, &o);
        CHECK_OK(p.ctx, p.st);
        CHECK_EQ(p.plan->settings.k_bits, bits_cases[i].k_bits);
        CHECK_EQ(p.plan->settings.v_bits, bits_cases[i].v_bits);
        planned_free(&p);
    }
}

TEST(kv_small_preset_codes_3_bits_as_uniform_cells_in_groups_of_64)
{
    tq_test_enc o = preset_options(TQ_KVSNAP_PRESET_SMALL, 64);
    planned p = plan_for(128, &o);
    CHECK_OK(p.ctx, p.st);
    const tqkv_record *t = &p.plan->meta.t[0];
    CHECK_EQ(t->codec, TQKV_CODEC_TQ);
    CHECK_EQ(t->uniform, 1);
    CHECK_EQ(t->bits, 4); /* 3 bits' distortion in 4-bit fields */
    CHECK_EQ(t->group, 64);
    planned_free(&p);
}

TEST(kv_lossless_preset_keeps_every_tensor)
{
    tq_test_enc o = preset_options(TQ_KVSNAP_PRESET_LOSSLESS, 0);
    planned p = plan_for(64, &o);
    CHECK_OK(p.ctx, p.st);
    CHECK_EQ(p.plan->n_coded, 0);
    CHECK_EQ(p.plan->n_kept, p.plan->meta.n_tensors);
    planned_free(&p);
}

TEST(kv_plan_refuses_turbo_bits_outside_2_to_4_given_or_from_the_preset)
{
    tq_test_enc o = TQ_TEST_ENC_INIT;
    o.q.codec = TQKV_CODEC_TURBO;
    planned p = plan_for(128, &o);
    CHECK_OK(p.ctx, p.st);
    planned_free(&p);
    o.q.k_bits = 5; /* given */
    p = plan_for(128, &o);
    CHECK_EQ(p.st, TQ_ERR_ARG);
    CHECK(strstr(tq_ctx_error(p.ctx), "2..4") != NULL, "message: %s", tq_ctx_error(p.ctx));
    planned_free(&p);
    o.q.k_bits = TQ_KVSNAP_UNSET;
    o.q.preset = TQ_KVSNAP_PRESET_Q8; /* 8 bits from the preset */
    p = plan_for(128, &o);
    CHECK_EQ(p.st, TQ_ERR_ARG);
    planned_free(&p);
}

TEST(kv_resolve_refuses_innerq_scales_where_nothing_is_tq_coded)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_test_enc o = TQ_TEST_ENC_INIT;
    o.q.innerq_path = "scales.gguf"; /* checked before it is read */
    CHECK_OK(ctx, tq_kvsnap_check(ctx, &o.q, &o.in));
    o.q.preset = TQ_KVSNAP_PRESET_LOSSLESS;
    CHECK_STATUS(ctx, tq_kvsnap_check(ctx, &o.q, &o.in), TQ_ERR_ARG);
    o.q.preset = TQ_KVSNAP_PRESET_BALANCED;
    o.q.codec = TQKV_CODEC_PROD;
    CHECK_STATUS(ctx, tq_kvsnap_check(ctx, &o.q, &o.in), TQ_ERR_ARG);
    CHECK(strstr(tq_ctx_error(ctx), "--codec prod") != NULL, "message: %s", tq_ctx_error(ctx));
    tq_ctx_free(ctx);
}

TEST(kv_describe_names_a_record_in_both_styles)
{
    tqkv_record t = {.codec = TQKV_CODEC_TQ, .group = 128, .bits = 4, .norm_correction = 1,
                     .sink_rows = 1, .planes = 1};
    char b[96];
    CHECK_EQ_STR(tq_kvsnap_describe(&t, TQ_DESCRIBE_PLAN, b, sizeof b), "tq(g=128,b=4,nc)+sink");
    CHECK_EQ_STR(tq_kvsnap_describe(&t, TQ_DESCRIBE_TABLE, b, sizeof b),
                 "tq g=128 b=4 nc sink planes");
    tqkv_record k = {.codec = TQKV_CODEC_RAW};
    CHECK_EQ_STR(tq_kvsnap_describe(&k, TQ_DESCRIBE_PLAN, b, sizeof b), "kept");
    CHECK_EQ_STR(tq_kvsnap_describe(&k, TQ_DESCRIBE_TABLE, b, sizeof b), "raw (lossless)");
    tqkv_record a = {.codec = TQKV_CODEC_ANGLE, .group = 64, .bits = 4, .radius_bits = 2};
    CHECK_EQ_STR(tq_kvsnap_describe(&a, TQ_DESCRIBE_PLAN, b, sizeof b), "angle(g=64,A=16,r=2)");
    CHECK_EQ_STR(tq_kvsnap_describe(&a, TQ_DESCRIBE_TABLE, b, sizeof b), "angle g=64 A=16 r=2");
}

TEST(kv_head_size_rule_given_then_layout_then_architecture)
{
    tq_head_source from;
    CHECK_EQ(tq_arch_head_size(64, NULL, 32, "gemma3", &from), 64);
    CHECK_EQ(from, TQ_HEAD_GIVEN);
    CHECK_EQ(tq_arch_head_size(0, NULL, 32, "gemma3", &from), 32);
    CHECK_EQ(from, TQ_HEAD_LAYOUT);
    CHECK_EQ(tq_arch_head_size(0, NULL, 0, "gemma3", &from), 256);
    CHECK_EQ(from, TQ_HEAD_ARCH);
    CHECK_EQ(tq_arch_head_size(0, NULL, 0, "llama", &from), 0);
    CHECK_EQ(from, TQ_HEAD_NONE);
}

TEST(kv_group_for_width_takes_the_head_size_or_guesses_a_power_of_two)
{
    int guessed;
    CHECK_EQ(tq_arch_group_for_width(512, 256, &guessed), 256);
    CHECK_EQ(guessed, 0);
    CHECK_EQ(tq_arch_group_for_width(96, 0, &guessed), 32);
    CHECK_EQ(guessed, 1);
    CHECK_EQ(tq_arch_group_for_width(384, 96, &guessed), 128); /* 96 is no power of two */
    CHECK_EQ(guessed, 1);
    CHECK_EQ(tq_arch_group_for_width(12, 0, &guessed), 0);
}

TEST(arch_table_knows_gemma3s_fixed_facts)
{
    const tq_arch *a = tq_arch_find("gemma3");
    CHECK(a != NULL);
    CHECK_EQ(a->head_dim, 256);
    CHECK_EQ(a->swa_period, 6);
    CHECK_EQ(a->rope, TQ_PAIRS_HALVES);
    CHECK_EQ(a->qk_norm, 1);
    CHECK_EQ(tq_arch_rope_pairs("llama"), TQ_PAIRS_ADJACENT);
    CHECK_EQ(tq_arch_swa_period("no-such-arch"), 0);
    CHECK(tq_arch_find(NULL) == NULL);
}
