/* test_ctx.c - the error context: a NULL context is a programmer error,
 * worker failures keep the lowest item's message, block types refuse
 * non-finite values. */
#include "harness.h"
#include "tq.h"

#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs fn in a child; returns the signal that ended it (0: it exited). */
static int child_signal(void (*fn)(void))
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        /* the assertion's message is expected: keep it off the test's output */
        if (!freopen("/dev/null", "w", stderr)) _exit(3);
        fn();
        _exit(0);
    }
    int ws = 0;
    if (pid < 0 || waitpid(pid, &ws, 0) != pid) return -1;
    return WIFSIGNALED(ws) ? WTERMSIG(ws) : 0;
}

static void quantize_without_context(void)
{
    float x[32] = {1.0f};
    uint8_t out[64];
    tq_quantize(NULL, TQ_DT_Q8_0, x, 32, out);
}

static void set_error_without_context(void) { tq_ctx_set_error(NULL, TQ_ERR_ARG, "lost"); }

TEST(null_context_asserts_in_a_codec_call)
{
#ifdef NDEBUG
    SKIP("built with NDEBUG: assertions are off");
#endif
    CHECK_EQ(child_signal(quantize_without_context), SIGABRT);
}

TEST(null_context_asserts_when_an_error_is_set)
{
#ifdef NDEBUG
    SKIP("built with NDEBUG: assertions are off");
#endif
    CHECK_EQ(child_signal(set_error_without_context), SIGABRT);
}

TEST(keep_first_reports_the_lowest_failing_item)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_ctx *w5 = tq_ctx_clone(ctx);
    tq_ctx *w2 = tq_ctx_clone(ctx);
    tq_ctx_set_error(w5, TQ_ERR_FORMAT, "item five");
    tq_ctx_set_error(w2, TQ_ERR_CORRUPT, "item two");
    size_t first = SIZE_MAX;
    tq_ctx_keep_first(ctx, &first, 5, w5);
    tq_ctx_keep_first(ctx, &first, 2, w2);
    tq_ctx_keep_first(ctx, &first, 7, w5);
    CHECK_EQ(first, 2);
    CHECK_EQ(tq_ctx_status(ctx), TQ_ERR_CORRUPT);
    CHECK_EQ_STR(tq_ctx_error(ctx), "item two");
    tq_ctx_free(w5);
    tq_ctx_free(w2);
    tq_ctx_free(ctx);
}

TEST(keep_first_without_a_worker_context_is_out_of_memory)
{
    tq_ctx *ctx = tq_ctx_new();
    size_t first = SIZE_MAX;
    tq_ctx_keep_first(ctx, &first, 3, NULL);
    CHECK_EQ(first, 3);
    CHECK_EQ(tq_ctx_status(ctx), TQ_ERR_NOMEM);
    tq_ctx_free(ctx);
}

TEST(quantize_refuses_non_finite_values_in_block_types)
{
    tq_ctx *ctx = tq_ctx_new();
    float x[32];
    for (int i = 0; i < 32; i++) x[i] = (float)i;
    x[17] = NAN;
    uint8_t out[128];
    CHECK_STATUS(ctx, tq_quantize(ctx, TQ_DT_Q8_0, x, 32, out), TQ_ERR_ARG);
    CHECK(strstr(tq_ctx_error(ctx), "value 17") != NULL, "message: %s", tq_ctx_error(ctx));
    CHECK_OK(ctx, tq_quantize(ctx, TQ_DT_F16, x, 32, out)); /* floats carry NaN through */
    tq_ctx_free(ctx);
}
