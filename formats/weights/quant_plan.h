/* quant_plan.h - which type each tensor gets in `tq quantize-tq4`: the
 * policies (all, attn, config-i), boundary layers, --tensor-type rules
 * (POSIX extended regex searched in the name, the first match wins, as
 * llama-quantize's --tensor-type), --keep, and llama-quantize's fallbacks
 * for rows that are not whole blocks (q4_K -> q5_0, q5_K -> q5_1,
 * q6_K -> q8_0, then F16; F16 for the other types). */
#ifndef TQ_QUANT_PLAN_H
#define TQ_QUANT_PLAN_H

#include "tq.h"

#include <regex.h>
#include <stddef.h>
#include <stdint.h>

#define QT_KEEP (-1) /* copy the tensor as it is */

typedef enum { QP_ALL = 0, QP_ATTN, QP_CONFIG_I } qp_policy;

typedef struct qp_rule {
    regex_t re;
    int type;
    char *src;
} qp_rule;

typedef struct quant_plan {
    int type; /* TQ_DT_TQ4_1S or TQ_DT_TQ3_1S */
    qp_policy policy;
    int boundary_layers; /* -1: the policy's default (2 for config-i, else 0) */
    int ffn_down_type;   /* config-i's type for ffn_down */
    uint32_t n_layers;   /* {arch}.block_count */
    qp_rule *rules;
    size_t n_rules;
} quant_plan;

const char *qp_policy_name(qp_policy p);
int qp_parse_policy(const char *s, qp_policy *p);
#define QP_TYPE_NAMES "tq4_1s tq3_1s q8_0 q6_K q5_K q4_K q5_1 q5_0 q4_1 q4_0 f16 bf16 f32 keep"
/* An output type by name (QP_TYPE_NAMES, any case); -2 if unknown. */
int qp_parse_type(const char *s);
const char *qp_type_name(int t);
/* "REGEX=TYPE"; the first rule that matches a name wins.  0, or -1 with err. */
int qp_add_rule(quant_plan *p, const char *spec, char *err, size_t errlen);
/* One rule per line, '#' comments and blank lines skipped. */
int qp_add_rules_file(quant_plan *p, const char *path, char *err, size_t errlen);
void qp_free(quant_plan *p);

/* Whether llama-quantize would quantize this tensor at all: 2-D or more, a
 * .weight, not a norm, router, position or token-type embedding. */
int qp_eligible(const char *name, uint32_t n_dims);
/* The type for a tensor; *fallback set (and *wanted the type asked for) when
 * that type did not fit the row length and its fallback was chosen. */
int qp_choose(const quant_plan *p, const char *name, uint32_t n_dims, const int64_t *ne,
              int *fallback, int *wanted);
/* The layer of "blk.N...." names, -1 for others. */
int qp_layer_of(const char *name);

#endif
