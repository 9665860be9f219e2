/* ctx.c - error context and execution settings. */
#include "tq_internal.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

const char *tq_version(void) { return TQ_VERSION_STRING; }

tq_ctx *tq_ctx_new(void)
{
    tq_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return NULL;
    ctx->simd = tq_simd_best();
    ctx->backend = TQ_BACKEND_CPU;
    return ctx;
}

void tq_ctx_free(tq_ctx *ctx) { free(ctx); }

tq_ctx *tq_ctx_clone(const tq_ctx *parent)
{
    tq_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return NULL;
    ctx->threads = 1;
    ctx->simd = parent->simd;
    ctx->backend = parent->backend;
    return ctx;
}

const char *tq_ctx_error(const tq_ctx *ctx) { return ctx->msg; }
tq_status tq_ctx_status(const tq_ctx *ctx) { return ctx->status; }

void tq_ctx_clear_error(tq_ctx *ctx)
{
    ctx->status = TQ_OK;
    ctx->msg[0] = 0;
}

const char *tq_status_name(tq_status st)
{
    static const char *const names[] = {/* in the enum's order */
                                        "ok",          "invalid argument", "out of memory",
                                        "unsupported", "bad format",       "I/O error",
                                        "corrupt data"};
    if ((unsigned)st >= sizeof names / sizeof *names) return "unknown status";
    return names[st];
}

tq_status tq_ctx_set_error(tq_ctx *ctx, tq_status st, const char *fmt, ...)
{
    TQ_NEED_CTX(ctx);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->msg, sizeof ctx->msg, fmt, ap);
    va_end(ap);
    ctx->status = st;
    return st;
}

void tq_ctx_copy_error(tq_ctx *dst, const tq_ctx *src)
{
    assert(dst && src);
    memcpy(dst->msg, src->msg, sizeof dst->msg);
    dst->status = src->status;
}

void tq_ctx_keep_first(tq_ctx *dst, size_t *first, size_t item, const tq_ctx *worker)
{
    assert(dst && first);
#pragma omp critical /* unnamed: a named one is a global symbol libtq.so would export */
    if (item < *first) {
        *first = item;
        if (worker && worker->status)
            tq_ctx_copy_error(dst, worker);
        else if (worker)
            tq_ctx_set_error(dst, TQ_ERR_ARG, "item %zu failed without a message", item);
        else
            tq_ctx_set_error(dst, TQ_ERR_NOMEM, "out of memory (a worker thread's context)");
    }
}

int tq_is_pow2(uint32_t v) { return v && !(v & (v - 1)); }

void tq_ctx_set_threads(tq_ctx *ctx, int n) { ctx->threads = n > 0 ? n : 0; }
int tq_ctx_threads(const tq_ctx *ctx) { return tq_resolve_threads(ctx); }

int tq_resolve_threads(const tq_ctx *ctx)
{
    TQ_NEED_CTX(ctx);
    if (ctx->threads > 0) return ctx->threads;
#ifdef _OPENMP
    return omp_get_num_procs();
#else
    return 1;
#endif
}

const char *tq_simd_name(tq_simd level)
{
    static const char *const names[] = {/* in the enum's order */
                                        "auto", "scalar", "avx2", "avx512"};
    if ((unsigned)level >= sizeof names / sizeof *names) return "unknown";
    return names[level];
}

tq_simd tq_simd_best(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return TQ_SIMD_AVX512;
    if (__builtin_cpu_supports("avx2")) return TQ_SIMD_AVX2;
#endif
    return TQ_SIMD_SCALAR;
}

tq_status tq_ctx_set_simd(tq_ctx *ctx, tq_simd level)
{
    TQ_NEED_CTX(ctx);
    tq_simd best = tq_simd_best();
    if (level == TQ_SIMD_AUTO) level = best;
    if (level != TQ_SIMD_SCALAR && level > best)
        return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED,
                       "SIMD level %s is not supported by this CPU (best: %s)", tq_simd_name(level),
                       tq_simd_name(best));
    if (level < TQ_SIMD_SCALAR || level > TQ_SIMD_AVX512)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "unknown SIMD level %d", (int)level);
    ctx->simd = level;
    return TQ_OK;
}

tq_simd tq_ctx_simd(const tq_ctx *ctx) { return ctx->simd; }

const tq_kernels *tq_kernels_for(tq_simd level)
{
    const tq_kernels *k = &tq_kernels_scalar;
    if (level == TQ_SIMD_AVX512)
        k = &tq_kernels_avx512;
    else if (level == TQ_SIMD_AVX2)
        k = &tq_kernels_avx2;
    /* a build without that instruction set leaves its table empty */
    return k->kv_encode ? k : &tq_kernels_scalar;
}

const tq_kernels *tq_kernels_of(const tq_ctx *ctx)
{
    TQ_NEED_CTX(ctx);
    if (ctx->backend == TQ_BACKEND_CUDA) return &tq_kernels_cuda;
    return tq_kernels_for(ctx->simd);
}

tq_status tq_require_cpu(tq_ctx *ctx, const char *what)
{
    TQ_NEED_CTX(ctx);
    if (ctx->backend == TQ_BACKEND_CPU) return TQ_OK;
    return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED,
                            "the %s backend cannot do %s: use a CPU context",
                            tq_kernels_of(ctx)->name, what);
}

tq_status tq_ctx_set_backend(tq_ctx *ctx, tq_backend backend)
{
    TQ_NEED_CTX(ctx);
    if (backend == TQ_BACKEND_CPU) {
        ctx->backend = backend;
        return TQ_OK;
    }
    if (backend != TQ_BACKEND_CUDA)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "unknown backend %d", (int)backend);
    if (!tq_cuda_built())
        return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED,
                                "this tq was built without CUDA (rebuild with nvcc on PATH)");
    if (tq_cuda_devices() < 1)
        return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED, "no CUDA device is visible");
    ctx->backend = backend;
    return TQ_OK;
}

tq_backend tq_ctx_backend(const tq_ctx *ctx) { return ctx->backend; }
