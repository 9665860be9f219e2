/* test_rotate_plan.c - rotate-weights' plan (formats/weights/rotate_plan.c) on
 * stories260K: every tensor's role in the residual stream, the norms folded
 * into their readers, R2's V rows and O columns; other models refused. */
#include "harness.h"
#include "rotate_plan.h"

#include <stdio.h>
#include <string.h>

static const rr_tensor *find(const rr_model *m, const char *name)
{
    for (size_t i = 0; i < m->n; i++)
        if (!strcmp(m->t[i].name, name)) return &m->t[i];
    return NULL;
}

TEST(rotate_plan_roles_on_stories260k)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_gguf *g = tq_test_open_stories(ctx); /* the shapes are what is checked */
    CHECK(g != NULL, "%s", tq_ctx_error(ctx));
    rr_model m;
    memset(&m, 0, sizeof m);
    int rc = rr_plan(ctx, g, 1, &m);
    const rr_tensor *emb = find(&m, "token_embd.weight"), *q = find(&m, "blk.0.attn_q.weight"),
                    *v = find(&m, "blk.0.attn_v.weight"), *o = find(&m, "blk.0.attn_output.weight"),
                    *n = find(&m, "blk.0.attn_norm.weight"), *down = find(&m, "blk.4.ffn_down.weight");
    int ok = rc == 0 && m.n_embd == 64 && m.head_dim == 8 && m.n_head_kv == 4 && !m.tied && emb && q && v && o && n && down;
    int roles = ok && emb->role == RR_EMBED && q->role == RR_READER && n->role == RR_NORM && o->role == RR_WRITER &&
                down->role == RR_WRITER && v->v_rows && o->o_cols && !q->v_rows;
    int folded = ok && q->norm >= 0 && !strcmp(tq_gguf_tensor_name(g, q->norm), "blk.0.attn_norm.weight");
    rr_free(&m);
    tq_gguf_close(g);
    CHECK(ok, "plan: %s", tq_ctx_error(ctx));
    CHECK(roles, "tensor roles");
    CHECK(folded, "attn_q reads attn_norm's gain");
    tq_ctx_free(ctx);
}

TEST(rotate_plan_refuses_other_graphs)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_gguf *g;
    CHECK(tq_gguf_open(ctx, "tests/fuzz/seeds/fuzz_gguf_read/tiny.gguf", NULL, &g) == TQ_OK, "%s", tq_ctx_error(ctx));
    rr_model m;
    memset(&m, 0, sizeof m);
    int rc = rr_plan(ctx, g, 1, &m);
    rr_free(&m);
    tq_gguf_close(g);
    CHECK(rc != 0 && tq_ctx_error(ctx)[0], "a model without a llama graph must be refused with a reason");
    tq_ctx_free(ctx);
}
