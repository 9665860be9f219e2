/* kv_codec.c - a record's coding as libtq runs it (kv_plan.h): the block codec its rows are
 * coded with, and whether the CUDA kernels serve a snapshot's codecs. */
#include "kv_plan.h"

tq_codec *tq_kvsnap_record_codec(tq_ctx *ctx, const tqkv_record *t)
{
    tq_codec_desc d;
    tq_codec *c = NULL;
    if (!tqkv_record_has_blocks(t)) return NULL;
    if (tqkv_codec_desc(t, &d)) {
        tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "layer %u: codec %u has no block codec", t->layer,
                         t->codec);
        return NULL;
    }
    tq_codec_new(ctx, &d, &c);
    return c;
}

int tq_kvsnap_cuda_kernels(const tqkv_meta *m)
{
    /* the kernels code and decode tq's and the fork's blocks; TurboAngle and TurboQuant-prod
       blocks run on the CPU (transform-coded and kept rows do either way) */
    for (uint32_t i = 0; i < m->n_tensors; i++)
        if (m->t[i].codec == TQKV_CODEC_ANGLE || m->t[i].codec == TQKV_CODEC_PROD) return 0;
    return 1;
}
