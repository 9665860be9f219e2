/* innerq_derive.h - InnerQ scales from K/V statistics: the derivation
 * calibrate-innerq and encode-kvdump's automatic scales share.  Returns a
 * tq_status with the context's message; prints nothing. */
#ifndef TQ_INNERQ_DERIVE_H
#define TQ_INNERQ_DERIVE_H

#include "innerq_model.h"
#include "innerq_scales.h"
#include "innerq_stats.h"

/* V's scales: none, from V's own energies, or in the metric W_o gives V */
typedef enum tq_innerq_v_method {
    TQ_INNERQ_V_OFF = 0,
    TQ_INNERQ_V_KV,
    TQ_INNERQ_V_WO
} tq_innerq_v_method;

typedef struct tq_innerq_derive_options {
    tq_innerq_method k_method; /* TQ_INNERQ_QK (needs the model), _KV or _FORK */
    tq_innerq_v_method v_method;
    int per_head;              /* one vector per KV head (else one per layer) */
    double strength;           /* the exponent */
    double clamp_lo, clamp_hi; /* 0, 0: no bounds */
    int pow2;                  /* round to powers of two */
} tq_innerq_derive_options;

/* The scales (set->s malloc'd, NULL on failure); how: where E[q^2] came from. */
tq_status tq_innerq_derive(tq_ctx *ctx, const tq_innerq_derive_options *o,
                           const tq_model *model, const tq_attn_model *am,
                           const tq_innerq_stats *st, tq_innerq_set *set, char *how,
                           size_t how_len);

/* The name a method is stored and reported under ("qk", "kv", "fork"). */
const char *tq_innerq_method_name(tq_innerq_method m);
/* 0 and *out, or -1 for a name that is none of them. */
int tq_innerq_method_parse(const char *name, tq_innerq_method *out);
int tq_innerq_v_method_parse(const char *name, tq_innerq_v_method *out);

#endif
