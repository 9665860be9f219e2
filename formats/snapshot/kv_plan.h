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

#include "arch.h"
#include "gguf.h"
#include "innerq_scales.h"
#include "kv_view.h"
#include "model.h"
#include "tqkv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The presets; their defaults are a table a stage in kv_presets.c (kv_presets.h). */
typedef enum tq_kvsnap_preset {
    TQ_KVSNAP_PRESET_BALANCED = 0,
    TQ_KVSNAP_PRESET_LOSSLESS,
    TQ_KVSNAP_PRESET_Q8,
    TQ_KVSNAP_PRESET_SMALL
} tq_kvsnap_preset;

/* The presets' names in tq_kvsnap_preset's order, NULL-terminated (the CLI's choices). */
extern const char *const tq_kvsnap_preset_names[];
const char *tq_kvsnap_preset_name(tq_kvsnap_preset p);

/* The one value of an option left unset: the preset's value, the model's head size, tq's block
 * (TQ_KVSNAP_REQUEST_INIT sets every such option to it; 0 is a value: no sink cells, no rate,
 * no zstd, Lloyd-Max cells...). */
#define TQ_KVSNAP_UNSET (-1)

/* K offsets (kv_plan.c): none, the per-channel mean of the rows, or the
 * pre-RoPE mean turned by each cell's position where the model's RoPE is
 * known (else, or where it leaves more energy, the mean). */
enum { TQ_KOFF_OFF = 0, TQ_KOFF_MEAN = 1, TQ_KOFF_ROPE = 2 };
/* Cells (kv_plan.c): Lloyd-Max, uniform, or uniform where the wider field is
 * 4 bits (3 bits' distortion: nibbles stay fast; 5-bit fields are slower) and
 * groups are of 64 or more (small groups lose). */
enum { TQ_CELLS_LLOYD_MAX = 0, TQ_CELLS_UNIFORM = 1, TQ_CELLS_AUTO = 2 };
/* Transform coding (kv_klt.h): never, for every tensor it can code, or
 * where its bits with the stored bases are fewer than the tq codec's. */
enum { TQ_TC_OFF = 0, TQ_TC_ON = 1, TQ_TC_AUTO = 2 };

struct tq_kvsnap_preset_row;

/* An encode's options have three lives, kept apart:
 *   tq_kvsnap_request  what the user asked: set once where a front end maps its options, never
 *                      changed after; plain values, TQ_KVSNAP_UNSET where left to the preset;
 *   tq_kvsnap_plan     the request resolved (tq_kvsnap_prepare, the one entry point that
 *                      resolves): every value held once, in plan->settings, beside the
 *                      per-tensor coding;
 *   tq_kvsnap_run      how it runs: threads, zstd level, progress (what it makes never depends
 *                      on threads or progress). */
typedef struct tq_kvsnap_request {
    tq_kvsnap_preset preset;
    int k_bits, v_bits;  /* codec bits 1..8; TQ_KVSNAP_UNSET: the preset's */
    int boundary_layers; /* first and last N layers at 8 bits */
    int head_dim;        /* rotation group; 0: the model's, else guessed from the width */
    /* the block for coded tensors: TQKV_CODEC_TQ, _TURBO (the fork's turbo2/3/4 blocks: bits
       2..4, rows of 128s), _ANGLE (bits b give b+1 angle and b-1 radius bits; 8: 8 and 8) or
       _PROD (TurboQuant-prod, b = 2..8); unset: TQKV_CODEC_TQ */
    int codec;
    /* InnerQ: a scales file to load (SCALES.gguf from calibrate-innerq, or a .npy), and whether
       to compute none where none is given (--innerq off): by default Q-aware K scales from the
       state where the model's QK-norm gains allow */
    const char *innerq_path;
    int innerq_off;
    int sink_cells;  /* the first N cells of each tq-coded K kept exact (attention sinks) */
    int k_offset;    /* TQ_KOFF_*: subtract an offset from each tq-coded K before coding */
    int no_planes;   /* keep 3- and 5-bit blocks as the codec packs them (for measuring) */
    int cells;       /* TQ_CELLS_*: tq blocks of uniform cells, b bits' distortion in b + 1-bit
                        fields that zstd entropy-codes to fewer bits than Lloyd-Max's b */
    int transform;         /* TQ_TC_*: transform-code K/V (kv_klt.h) */
    double k_rate, v_rate; /* its bits per value (0: none); unset: the preset's */
    int past_bits; /* bits of cells a sliding-window layer no longer attends to (0: as the rest) */
    int recent_cells, recent_bits; /* a layer's newest cells, coded recent_bits finer */
    const char *base_name;         /* --append: the base's file name, recorded for decode */
} tq_kvsnap_request;

/* The request before the user's: every option that has a default TQ_KVSNAP_UNSET
 * (`tq_kvsnap_request q = TQ_KVSNAP_REQUEST_INIT;`, then what the user gave). */
#define TQ_KVSNAP_REQUEST_INIT                                                                     \
    {                                                                                              \
        .preset = TQ_KVSNAP_PRESET_BALANCED, .k_bits = TQ_KVSNAP_UNSET,                            \
        .v_bits = TQ_KVSNAP_UNSET, .codec = TQ_KVSNAP_UNSET, .sink_cells = TQ_KVSNAP_UNSET,        \
        .k_offset = TQ_KVSNAP_UNSET, .cells = TQ_KVSNAP_UNSET, .transform = TQ_KVSNAP_UNSET,       \
        .k_rate = TQ_KVSNAP_UNSET, .v_rate = TQ_KVSNAP_UNSET, .past_bits = TQ_KVSNAP_UNSET,        \
        .recent_cells = TQ_KVSNAP_UNSET, .recent_bits = TQ_KVSNAP_UNSET                            \
    }

/* What a request is applied to besides the state: what the caller opened or computed. */
typedef struct tq_kvsnap_inputs {
    const tq_model *model;    /* NULL, or the model (model.h): head size, RoPE, layers, window,
                                 and a fingerprint decode can check */
    const tqkv_reader *base;  /* --append: store only the cells after the base's */
    /* InnerQ scales a caller made (else from request.innerq_path or automatic): innerq_layers
     * x 2 (K, V) x innerq_dim floats (innerq_layers 1: every layer alike; innerq_dim the group
     * or the row width) */
    const float *innerq;
    uint32_t innerq_layers, innerq_dim;
} tq_kvsnap_inputs;

/* How a snapshot is made: no byte depends on threads or progress; the zstd level is the
 * chunks' (the plan weighs its choices at it and records it). */
typedef struct tq_kvsnap_run {
    int zstd_level;                                                 /* 0 = none */
    int threads;                                                    /* 0 = all */
    void (*on_progress)(void *user, uint64_t done, uint64_t total); /* source K/V bytes done */
    void *progress_user;
} tq_kvsnap_run;
#define TQ_KVSNAP_RUN_INIT {.zstd_level = TQ_KVSNAP_UNSET} /* tq's level (kv_presets.h) */

/* The request resolved: each value once (the preset's where the user left it, the plan's
 * where it depends on the state), with the inputs; held by the plan (plan->settings). */
typedef struct tq_kvsnap_settings {
    tq_kvsnap_preset preset;
    const struct tq_kvsnap_preset_row *row; /* the preset's values */
    int k_bits, v_bits;   /* the blocks' bits (the plan sets them for the state's heads) */
    int boundary_layers;
    int head_dim;
    const tq_model *model;
    int codec;
    const float *innerq; /* the scales the plan applies (NULL: none), as tq_kvsnap_inputs' */
    uint32_t innerq_layers, innerq_dim;
    int innerq_file; /* they came from the user (else computed: --innerq auto) */
    const char *innerq_path;
    int innerq_off;
    int sink_cells;
    int k_offset;
    int no_planes;
    int cells;
    int transform;
    double k_rate, v_rate; /* the transform's bits a value (the plan's where not asked) */
    int past_bits;         /* the past-window cells' bits (the plan's: 0 where none has any) */
    int recent_cells, recent_bits;
    const tqkv_reader *base;
    const char *base_name;
    int zstd_level; /* the run's at planning: the level the plan's choices were weighed at */
} tq_kvsnap_settings;

/* The request checked against itself and the inputs before any file is read (TQ_ERR_ARG with
 * the reason: a usage error).  tq_kvsnap_prepare checks it again and resolves it. */
tq_status tq_kvsnap_check(tq_ctx *ctx, const tq_kvsnap_request *q, const tq_kvsnap_inputs *in);

typedef struct tq_kvsnap_plan {
    tqkv_meta meta;               /* what the snapshot will record: per tensor its coding */
    tq_kvsnap_settings settings;  /* the request resolved, each value once */
    const tq_kv_tensor **src;     /* meta.t[i] is the view's src[i] */
    uint32_t swa_window;    /* the model's sliding window (0: none, or no model) */
    uint32_t group;     /* the rotation group of coded tensors (0: none coded) */
    /* where the group came from: TQ_HEAD_NONE guessed from the row width (no head size
       given or known), TQ_HEAD_ARCH the state's architecture (group_arch), else the head
       size's source (meaningful where group is not 0) */
    tq_head_source group_source;
    char group_arch[32];
    char layer_rule[192]; /* iSWA: how cache layers were matched to model layers ("" if not) */
    uint32_t n_coded, n_kept;
    uint32_t n_transformed; /* coded tensors of codec KLT */
} tq_kvsnap_plan;

void tq_kvsnap_plan_free(tq_kvsnap_plan *p);
/* A record's coding in words, the one description --dry-run (TQ_DESCRIBE_PLAN:
 * "tq(g=128,b=4,nc)+sink", "klt(g=256,m=228,3.00b,state)+sink+pre-rope": m
 * components a head, the indices' bits per value, the basis from the state
 * itself) and inspect (TQ_DESCRIBE_TABLE: "tq g=128 b=4 nc sink planes")
 * print. */
typedef enum tq_describe_style { TQ_DESCRIBE_PLAN, TQ_DESCRIBE_TABLE } tq_describe_style;
const char *tq_kvsnap_describe(const tqkv_record *t, tq_describe_style style, char *buf, size_t n);
/* --innerq auto, for resolved settings: Q-aware K scales computed from
 * this state where the model's QK-norm gains give E[q^2] exactly; none otherwise.  Fills *set
 * (n_layer 0: none) and *why (what was done, for the log).  The plan keeps them for the K it
 * codes with tq's blocks and drops them where it takes the transform. */
tq_status tq_kvsnap_auto_innerq(tq_ctx *ctx, const tq_kv_view *v, const tq_kvsnap_settings *o,
                                tq_innerq_set *set, const char **why);
/* Marks in v (tq_kv_view_set_hadamard) the quantized K/V tensors whose rows
 * are stored Hadamard-rotated (today's llama.cpp does that to quantized
 * caches), judged from the rows, so that they are read, planned and coded in
 * the model's channels; with o->base, the base's marks.  *found: how many. */
tq_status tq_kvsnap_find_rotation(tq_ctx *ctx, tq_kv_view *v, const tq_kvsnap_settings *o,
                                  uint32_t *found);
/* 1 when the plan transform-codes K and leaves no K to tq's blocks: InnerQ's
 * scales would serve no tensor (the plan drops them where it takes the
 * transform, whose basis decorrelates the channels). */
int tq_kvsnap_k_transformed(const tq_kvsnap_plan *p);
/* Payload bytes tensor i will take before zstd (coded blocks, or kept rows). */
uint64_t tq_kvsnap_plan_payload(const tq_kvsnap_plan *p, uint32_t i);

/* A snapshot prepared: the plan, and what preparing it found. */
typedef struct tq_kvsnap_prepared {
    tq_kvsnap_plan *plan;      /* its settings: the request resolved, the scales filled in */
    tq_innerq_set scales;      /* loaded from request.innerq_path or computed (owned) */
    const char *innerq_why;    /* what automatic InnerQ did (NULL: not tried) */
    uint32_t rotated;          /* tensors stored Hadamard-rotated: coded in the model's channels */
    int cuda_kernels;          /* CUDA kernels code this plan's blocks (tq_kvsnap_cuda_kernels) */
} tq_kvsnap_prepared;

/* The one entry point that resolves: the request checked (TQ_ERR_ARG: a usage error) and
 * resolved against the preset and the inputs, then, in the one order encode-kvdump and
 * tq_kvsnap_encode share, the scales file loaded (and refused when made for another model),
 * the source's Hadamard rotation found (tq_kvsnap_find_rotation: it marks v), automatic
 * InnerQ where no scales are given and innerq_off is not set, and the plan. */
tq_status tq_kvsnap_prepare(tq_ctx *ctx, tq_kv_view *v, const tq_kvsnap_request *q,
                            const tq_kvsnap_inputs *in, const tq_kvsnap_run *run,
                            tq_kvsnap_prepared **out);
void tq_kvsnap_prepared_free(tq_kvsnap_prepared *p);
/* The block codec of a record's rows (tq, turbo, angle, prod), ready to run; NULL for a
 * tensor without blocks (kept rows, transform coding), an invalid record or when out of
 * memory (ctx says). */
tq_codec *tq_kvsnap_record_codec(tq_ctx *ctx, const tqkv_record *t);
/* Whether the CUDA kernels serve a snapshot's coded tensors (tq and turbo blocks; TurboAngle
 * and TurboQuant-prod run on the CPU): one rule for encoding and decoding. */
int tq_kvsnap_cuda_kernels(const tqkv_meta *m);

/* calibrate-innerq's defaults, which automatic InnerQ runs with: the exponent and the fewest
 * cells a layer is calibrated on (kv_presets.c). */
void tq_kvsnap_innerq_defaults(double *strength, uint32_t *min_cells);

/* TQ_OK if the snapshot was made for model g, else why not (TQ_ERR_ARG). */
tq_status tq_kvsnap_check_model(tq_ctx *ctx, const tqkv_meta *m, const tq_model *model,
                                const char *model_label);

#ifdef __cplusplus
}
#endif
#endif
