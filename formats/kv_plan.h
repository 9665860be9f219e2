/*
 * kv_plan.h - the snapshot plan: how each K/V tensor of a KV view is coded.
 *
 * One function turns (options, the model if given, the view) into a
 * per-tensor plan: codec, bits, rotation group, norm correction, InnerQ
 * scales, or kept as it is; the rows per chunk; for --append, the coding the
 * base fixed.  encode-kvdump executes it (kv_snapshot.h), `--dry-run`
 * prints it, and calibration and benchmarks read it: the policy lives here
 * and nowhere else.
 */
#ifndef TQ_KV_PLAN_H
#define TQ_KV_PLAN_H

#include "gguf.h"
#include "kv_view.h"
#include "tqkv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* BALANCED (the default): 5-bit K and 4-bit V for heads of 32 or less, 4 and
 * 4 above (the fp16 norm per head costs 16/g bits per value, so small heads
 * get K one bit more); Q8: 8 and 8; SMALL: 3 and 3; LOSSLESS: every byte
 * kept. */
typedef enum tq_kv_preset {
    TQ_KV_PRESET_BALANCED = 0,
    TQ_KV_PRESET_LOSSLESS,
    TQ_KV_PRESET_Q8,
    TQ_KV_PRESET_SMALL
} tq_kv_preset;

int tq_kv_preset_parse(const char *name, tq_kv_preset *out); /* 0, or -1 if unknown */
const char *tq_kv_preset_name(tq_kv_preset p);

/* K offsets (kv_plan.c): none, the per-channel mean of the rows, or the
 * pre-RoPE mean turned by each cell's position where the model's RoPE is
 * known (else, or where it leaves more energy, the mean). */
enum { TQ_KOFF_OFF = 0, TQ_KOFF_MEAN = 1, TQ_KOFF_ROPE = 2 };
/* Cells (kv_plan.c): Lloyd-Max, uniform, or uniform where the wider field is
 * 4 bits (3 bits' distortion: nibbles stay fast; 5-bit fields are slower) and
 * groups are of 64 or more (small groups lose). */
enum { TQ_CELLS_LLOYD_MAX = 0, TQ_CELLS_UNIFORM = 1, TQ_CELLS_AUTO = 2 };

typedef struct tq_kvsnap_options {
    tq_kv_preset preset;
    int k_bits, v_bits;    /* tq codec bits 1..8; 0: the preset's */
    int boundary_layers;   /* first and last N layers at 8 bits */
    uint32_t head_dim;     /* rotation group; 0: the model's, else guessed from the row width */
    const tq_gguf *model;  /* NULL, or the model: head size, and a fingerprint decode can check */
    const char *profile;   /* type-id profile name used to read the source */
    int turbo;             /* the fork's turbo2/3/4 blocks (bits 2..4, rows of 128s) */
    int family;            /* TQKV_CODEC_TQ (0 means it too), _ANGLE or _PROD: the block for coded
                              tensors; bits b give TurboAngle b+1 angle and b-1 radius bits
                              (8: 8 and 8), TurboQuant-prod b = 2..8 */
    /* InnerQ: per-channel scales s_j multiplied in before coding and divided
     * out after decoding, for tq-coded tensors: innerq holds
     * innerq_layers x 2 (K, V) x innerq_dim floats; innerq_layers 1 applies
     * the same K and V scales to every layer.  innerq_dim is the group (one
     * vector for every head) or the row width (one per KV head). */
    const float *innerq;
    uint32_t innerq_layers, innerq_dim;
    int sink_cells;        /* the first N cells of each tq-coded K kept exact (attention sinks) */
    int k_offset;          /* TQ_KOFF_*: subtract an offset from each tq-coded K before coding */
    int no_planes;         /* keep 3- and 5-bit blocks as the codec packs them (for measuring) */
    int uniform;           /* TQ_CELLS_*: tq blocks of uniform cells, b bits' distortion in b + 1-bit
                              fields that zstd entropy-codes to fewer bits than Lloyd-Max's b */
    const tqkv_reader *base; /* --append: store only the cells after the base's */
    const char *base_name;   /* the base's file name, recorded for decode */
    /* execution only (tq_kvsnap_execute) */
    int zstd_level;        /* for the chunks; 0 = none */
    int threads;           /* 0 = all */
    void (*progress)(void *user, uint64_t done, uint64_t total); /* source K/V bytes done */
    void *progress_user;
} tq_kvsnap_options;

typedef struct tq_kvsnap_plan {
    tqkv_meta meta;                /* what the snapshot will record: per tensor its coding */
    const tq_kv_tensor **src;      /* meta.t[i] is the view's src[i] */
    tq_kv_preset preset;
    int k_bits, v_bits;            /* resolved */
    uint32_t group;                /* the rotation group of coded tensors (0: none coded) */
    int group_guessed;             /* no model or head size given: 1 from the row width,
                                      2 from the state's architecture (group_arch) */
    char group_arch[32];
    char layer_rule[192];          /* iSWA: how cache layers were matched to model layers ("" if not) */
    uint32_t n_coded, n_kept;
} tq_kvsnap_plan;

tq_status tq_kvsnap_plan_make(tq_ctx *ctx, const tq_kv_view *v, const tq_kvsnap_options *o, tq_kvsnap_plan **out);
void tq_kvsnap_plan_free(tq_kvsnap_plan *p);
/* Payload bytes tensor i will take before zstd (coded blocks, or kept rows). */
uint64_t tq_kvsnap_plan_payload(const tq_kvsnap_plan *p, uint32_t i);

/* The head size every model of a known architecture has, for a state file
 * that names its architecture but comes without --model or --head-dim
 * (gemma3: 256, where the row width of one KV head cannot tell 256 from
 * 2 x 128); 0 for the others, whose rows decide (see pick_group). */
uint32_t tq_arch_head_dim(const char *arch);

/* Model identity: a hash of the architecture, its hyperparameter keys and
 * the tensor table (names, types, shapes), not of the weights' values. */
uint64_t tq_model_fingerprint(const tq_gguf *g);
/* The attention head size of a model, 0 if the metadata does not say. */
uint32_t tq_model_head_dim(const tq_gguf *g, int value);
/* TQ_OK if the snapshot was made for model g, else why not (TQ_ERR_ARG). */
tq_status tq_kvsnap_check_model(tq_ctx *ctx, const tqkv_meta *m, const tq_gguf *g, const char *model_label);

#ifdef __cplusplus
}
#endif
#endif
