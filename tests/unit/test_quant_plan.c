/* test_quant_plan.c - quantize-tq4's policy (formats/weights/quant_plan.c): which type
 * each tensor of a model gets under config-i, all and attn, with boundary
 * layers, --tensor-type rules (the first match wins), --keep and the F16
 * fallback for rows that are not whole blocks. */
#include "harness.h"
#include "quant_plan.h"

#include <string.h>

static int choose(const quant_plan *p, const char *name, int64_t ne0, int *fallback)
{
    int64_t ne[4] = {ne0, 64, 1, 1};
    int wanted;
    return qp_choose(p, name, 2, ne, fallback, &wanted);
}

TEST(quant_plan_config_i)
{
    quant_plan p = {.type = TQ_DT_TQ4_1S, .policy = QP_CONFIG_I, .boundary_layers = -1, .ffn_down_type = TQ_DT_Q8_0,
                    .n_layers = 12};
    int fb;
    CHECK_EQ(choose(&p, "blk.5.attn_q.weight", 256, &fb), TQ_DT_TQ4_1S);
    CHECK(!fb);
    CHECK_EQ(choose(&p, "blk.5.ffn_up.weight", 256, &fb), TQ_DT_TQ4_1S);
    CHECK(choose(&p, "blk.5.ffn_down.weight", 256, &fb) == TQ_DT_Q8_0, "ffn_down in config-i's q8_0");
    CHECK(choose(&p, "blk.1.attn_q.weight", 256, &fb) == TQ_DT_Q8_0, "the first two layers in q8_0");
    CHECK(choose(&p, "blk.10.attn_v.weight", 256, &fb) == TQ_DT_Q8_0, "the last two layers in q8_0");
    CHECK_EQ(choose(&p, "blk.9.attn_v.weight", 256, &fb), TQ_DT_TQ4_1S);
    CHECK_EQ(choose(&p, "token_embd.weight", 256, &fb), QT_KEEP);
    CHECK_EQ(choose(&p, "output.weight", 256, &fb), QT_KEEP);
    CHECK(choose(&p, "blk.5.attn_norm.weight", 256, &fb) == QT_KEEP, "norms are never quantized");
    CHECK(choose(&p, "blk.5.attn_q.weight", 172, &fb) == TQ_DT_F16 && fb, "rows of 172: F16 fallback");
    p.boundary_layers = 0;
    CHECK(choose(&p, "blk.0.attn_q.weight", 256, &fb) == TQ_DT_TQ4_1S, "--boundary-layers 0");
}

TEST(quant_plan_kquant_fallbacks)
{
    quant_plan p = {.type = TQ_DT_TQ4_1S, .policy = QP_CONFIG_I, .boundary_layers = -1, .ffn_down_type = TQ_DT_Q4_K,
                    .n_layers = 12};
    int fb;
    char err[256];
    CHECK(choose(&p, "blk.5.ffn_down.weight", 768, &fb) == TQ_DT_Q4_K && !fb, "config-i: ffn_down in q4_K");
    CHECK(choose(&p, "blk.5.ffn_down.weight", 800, &fb) == TQ_DT_Q5_0 && fb, "q4_K on rows of 800 falls back to q5_0");
    CHECK(choose(&p, "blk.5.ffn_down.weight", 792, &fb) == TQ_DT_F16 && fb, "and to F16 when 32 does not divide");
    CHECK(qp_add_rule(&p, "attn_v=q6_K", err, sizeof err) == 0 && qp_add_rule(&p, "attn_k=Q5_K", err, sizeof err) == 0,
          "%s", err);
    CHECK_EQ(choose(&p, "blk.5.attn_v.weight", 512, &fb), TQ_DT_Q6_K);
    CHECK(!fb);
    CHECK(choose(&p, "blk.5.attn_v.weight", 640, &fb) == TQ_DT_Q8_0 && fb, "q6_K falls back to q8_0");
    CHECK(choose(&p, "blk.5.attn_k.weight", 640, &fb) == TQ_DT_Q5_1 && fb, "q5_K falls back to q5_1");
    CHECK_EQ(choose(&p, "blk.5.attn_k.weight", 600, &fb), TQ_DT_F16);
    CHECK(fb);
    CHECK(qp_parse_type("q4_k") == TQ_DT_Q4_K && !strcmp(qp_type_name(TQ_DT_Q4_K), "q4_K"), "names as ggml's, any case");
    qp_free(&p);
}

TEST(quant_plan_policies_and_rules)
{
    quant_plan p = {.type = TQ_DT_TQ3_1S, .policy = QP_ATTN, .boundary_layers = -1, .ffn_down_type = TQ_DT_Q8_0,
                    .n_layers = 12};
    int fb;
    char err[256];
    CHECK(choose(&p, "blk.0.attn_k.weight", 64, &fb) == TQ_DT_TQ3_1S, "attn: no boundary layers by default");
    CHECK_EQ(choose(&p, "blk.3.ffn_gate.weight", 64, &fb), QT_KEEP);
    CHECK(qp_add_rule(&p, "blk\\.3\\.=keep", err, sizeof err) == 0, "%s", err);
    CHECK(qp_add_rule(&p, "ffn_gate=q4_0", err, sizeof err) == 0, "%s", err);
    CHECK(choose(&p, "blk.4.ffn_gate.weight", 64, &fb) == TQ_DT_Q4_0, "a rule adds a tensor");
    CHECK(choose(&p, "blk.3.ffn_gate.weight", 64, &fb) == QT_KEEP, "the first matching rule wins");
    CHECK_EQ(qp_add_rule(&p, "(=q8_0", err, sizeof err), -1);
    CHECK(err[0], "a bad regex is refused");
    CHECK(qp_add_rule(&p, "attn=q9", err, sizeof err) == -1 && strstr(err, "q9"), "%s", err);
    qp_free(&p);
    p = (quant_plan){.type = TQ_DT_TQ4_1S, .policy = QP_ALL, .boundary_layers = -1, .n_layers = 12};
    CHECK(choose(&p, "blk.0.ffn_down.weight", 64, &fb) == TQ_DT_TQ4_1S, "all: every eligible weight");
    qp_policy pol;
    CHECK_EQ(qp_parse_policy("config-i", &pol), 0);
    CHECK_EQ(pol, QP_CONFIG_I);
    CHECK(!strcmp(qp_policy_name(pol), "config-i"));
    CHECK(qp_parse_policy("most", &pol) != 0);
    CHECK_EQ(qp_parse_type("q9"), -2);
    CHECK_EQ(qp_parse_type("keep"), QT_KEEP);
    CHECK_EQ(qp_parse_type("tq3_1s"), TQ_DT_TQ3_1S);
    CHECK_EQ(qp_layer_of("blk.17.attn_q.weight"), 17);
    CHECK_EQ(qp_layer_of("output.weight"), -1);
}
