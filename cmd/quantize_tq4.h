/* quantize_tq4.h - what quantize_tq4.c shares with its report (quantize_report.c). */
#ifndef TQ_CMD_QUANTIZE_TQ4_H
#define TQ_CMD_QUANTIZE_TQ4_H

#include "gguf.h"
#include "imatrix.h"
#include "quant_plan.h"

#include <stdint.h>

typedef struct opts {
    const char *in, *out, *imatrix;
    tq_gguf_options gopt;
    quant_plan plan;
    int allow_requantize, dry_run, json, quiet, search_fork;
    int simulate;           /* --simulate: converted tensors written as dequantized values */
    tq_dtype simulate_type; /* ... of this float type (f32 or f16) */
    long threads;
} opts;

/* One tensor's fate. */
typedef struct tjob {
    int64_t i;
    const tq_ggml_type *in_ty, *out_ty;
    int out;     /* output dtype, or QT_KEEP */
    int convert; /* decoded and coded again (else copied byte for byte) */
    int fallback, wanted;
    uint64_t in_bytes, out_bytes;
    double rel_err, wrel_err; /* NAN when not measured */
    int weighted;
} tjob;

/* A tensor's shape as llama-quantize prints it ("  4096,  4096,     1,     1"). */
void qt_fmt_shape(char *b, size_t n, const int64_t *ne);
/* llama-quantize's line for one tensor, on stderr. */
void qt_log_line(const tq_gguf *g, const tjob *j, int64_t n, const opts *o);
/* --json: the plan and what each tensor became, on stdout. */
void qt_json_report(const tq_gguf *g, const tjob *jobs, int64_t n, const opts *o, double secs,
                    uint64_t in_b, uint64_t out_b, uint64_t weights);
/* An imatrix that names none of the TQ tensors is worth a word. */
void qt_imatrix_warning(const tq_gguf *g, const tq_imatrix *im, const tjob *jobs, int64_t n,
                        const opts *o);
/* The sizes, counts and time, on stderr. */
void qt_print_summary(const tjob *jobs, int64_t n, const opts *o, double secs, uint64_t in_b,
                      uint64_t out_b, uint64_t weights);

#endif
