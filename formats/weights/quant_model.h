/* quant_model.h - a model quantized as `tq quantize-tq4` does it, prepared and then executed
 * as a snapshot is.  tq_quant_prepare decides every tensor's type before a byte is written
 * (quant_plan.h's policy; a refusal leaves no file); tq_quant_execute streams the converted
 * model from the mapped input tensor by tensor: a bounded slice of rows is dequantized, coded
 * and decoded again to measure its error, so memory does not grow with the model. */
#ifndef TQ_QUANT_MODEL_H
#define TQ_QUANT_MODEL_H

#include "gguf.h"
#include "imatrix.h"
#include "quant_plan.h"

#include <stdint.h>

/* One tensor's fate. */
typedef struct tq_quant_job {
    int64_t i; /* the tensor's index in the input */
    const tq_ggml_type *in_ty, *out_ty;
    int out;     /* output dtype, or QT_KEEP */
    int convert; /* decoded and coded again (else copied byte for byte) */
    int fallback, wanted;     /* quant_plan.h's fallback: the type wanted and not taken */
    uint64_t in_bytes, out_bytes;
    double rel_err, wrel_err; /* NAN when not measured */
    int weighted;             /* coded with the imatrix's importances */
} tq_quant_job;

typedef struct tq_quant_options {
    const quant_plan *plan;   /* the policy and its rules; plan->n_layers the model's */
    const char *in_label;     /* the input's name in messages */
    const char *imatrix_name; /* recorded in the model (its base name), NULL: none given */
    const tq_imatrix *im;     /* the importances, or NULL */
    int allow_requantize;     /* accept quantized inputs other than q8_0 */
    int search_fork;          /* the fork's search for TQ3_1S / TQ4_1S, bit for bit */
    int simulate;             /* converted tensors written as their dequantized values */
    tq_dtype simulate_type;   /* ... of this float type (f32 or f16) */
    int threads;
    void (*on_progress)(void *user, uint64_t done, uint64_t total); /* input bytes done */
    void (*on_tensor)(void *user, const tq_quant_job *j);          /* a tensor written */
    void *user;
} tq_quant_options;

/* Every tensor's type, size and whether it is converted, into jobs[n_tensors]; TQ_ERR_ARG
 * where a tensor cannot be converted as asked (a type tq cannot dequantize, a requantization
 * not allowed, a type the profile has no id for). */
tq_status tq_quant_prepare(tq_ctx *ctx, const tq_gguf *g, const tq_quant_options *o,
                           tq_quant_job *jobs);
/* The converted model to out (through a temporary renamed into place; inputs[n_inputs] are
 * the files it must not replace), the jobs' errors filled in. */
tq_status tq_quant_execute(tq_ctx *ctx, const tq_gguf *g, tq_quant_job *jobs,
                           const tq_quant_options *o, const char *out,
                           const char *const *inputs, int n_inputs);

#endif
