/* kv_describe.c - a record's coding in words, the one description --dry-run and inspect
 * print (kv_plan.h, tq_kvsnap_describe). */
#include "kv_plan.h"

#include <stdio.h>
#include <string.h>

typedef struct describe_words {
    const char *open, *sep, *close; /* around the block's parameters */
    const char *kept, *turbo_note;  /* raw rows; after turbo's bits */
    const char *attr;               /* before each attribute of a tq block */
    int planes;                     /* name the planes too */
} describe_words;

static const describe_words describe_styles[] = {
    /*                      open sep  close kept              turbo_note       attr planes */
    [TQ_DESCRIBE_PLAN] = {"(", ",", ")", "kept", "", "+", 0},
    [TQ_DESCRIBE_TABLE] = {" ", " ", "", "raw (lossless)", " (fork blocks)", " ", 1},
};

const char *tq_kvsnap_describe(const tqkv_record *t, tq_describe_style style, char *b, size_t n)
{
    const describe_words *w = &describe_styles[style];
    const char *sep = w->sep;
    if (t->codec == TQKV_CODEC_RAW) {
        snprintf(b, n, "%s", w->kept);
    } else if (t->codec == TQKV_CODEC_TURBO) {
        snprintf(b, n, "turbo%u%s", t->bits, w->turbo_note);
    } else if (t->codec == TQKV_CODEC_ANGLE) {
        snprintf(b, n, "angle%sg=%u%sA=%u%sr=%u%s", w->open, t->group, sep, 1u << t->bits, sep,
                 t->radius_bits, w->close);
    } else if (t->codec == TQKV_CODEC_PROD) {
        snprintf(b, n, "prod%sg=%u%sb=%u%s", w->open, t->group, sep, t->bits, w->close);
    } else if (t->codec == TQKV_CODEC_KLT) { /* m: the heads' mean component count */
        uint64_t nh = t->width / t->group;
        const char *a = w->attr;
        char rate[32] = ""; /* as planned: the rate measured and where the basis comes from */
        if (t->klt_rate > 0) snprintf(rate, sizeof rate, "%s%.2fb%sstate", sep, t->klt_rate, sep);
        snprintf(b, n, "klt%sg=%u%sm=%llu%s%s%s%s%s%s%s%s", w->open, t->group, sep,
                 (unsigned long long)((tqkv_klt_components(t) + nh / 2) / nh), rate, w->close,
                 t->sink_rows ? a : "", t->sink_rows ? "sink" : "", t->rope_pos ? a : "",
                 t->rope_pos ? "pre-rope" : "", t->klt_gain ? a : "", t->klt_gain ? "gains" : "");
    } else {
        const char *offset = "";
        if (t->rope_pos)
            offset = "rope-offset";
        else if (t->offset)
            offset = "offset";
        /* in the plan's style the cells' kind is a parameter, the rest attributes */
        const char *a = w->attr;
        int pl = w->planes && t->planes;
        snprintf(b, n, "tq%sg=%u%sb=%u%s%s%s%s%s%s%s%s%s%s%s%s%s", w->open, t->group, sep, t->bits,
                 t->norm_correction ? sep : "", t->norm_correction ? "nc" : "",
                 t->uniform ? sep : "", t->uniform ? "uniform" : "", w->close, t->innerq ? a : "",
                 t->innerq ? "innerq" : "", t->sink_rows ? a : "", t->sink_rows ? "sink" : "",
                 *offset ? a : "", offset, pl ? a : "", pl ? "planes" : "");
    }
    if (t->coarse_end && t->codec == TQKV_CODEC_KLT) {
        size_t used = strlen(b);
        snprintf(b + used, n - used, "%spast(<%u,step x%g)", w->attr, t->coarse_end,
                 (double)t->coarse_scale);
    } else if (t->coarse_end) {
        size_t used = strlen(b);
        snprintf(b + used, n - used, "%spast(<%u,b=%u%s)", w->attr, t->coarse_end,
                 t->coarse_bits, t->coarse_uniform ? ",uniform" : "");
    }
    if (t->hadamard && t->codec != TQKV_CODEC_RAW) { /* coded in the model's channels */
        size_t used = strlen(b);
        snprintf(b + used, n - used, "%sunrotated(%u)", w->attr, t->hadamard);
    }
    return b;
}
