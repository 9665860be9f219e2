/* gguf_types.c - ggml tensor type ids under each type-id profile.  Sizes are
 * ggml's static_asserts (ggml-common.h), fork types from TT 69d8e4be4; see
 * ../shared/reference/gguf-rules.md section 6 and turboquant-formats.md section 1. */
#include "gguf.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define NO_DT -1

/* Upstream ids 0..42 (d99724f2).  Removed ids (4, 5, 31-33, 36-38) are absent. */
static const tq_ggml_type upstream[] = {
    {0, "f32", 1, 4, TQ_DT_F32},
    {1, "f16", 1, 2, TQ_DT_F16},
    {2, "q4_0", 32, 18, TQ_DT_Q4_0},
    {3, "q4_1", 32, 20, TQ_DT_Q4_1},
    {6, "q5_0", 32, 22, TQ_DT_Q5_0},
    {7, "q5_1", 32, 24, TQ_DT_Q5_1},
    {8, "q8_0", 32, 34, TQ_DT_Q8_0},
    {9, "q8_1", 32, 36, NO_DT},
    {10, "q2_K", 256, 84, TQ_DT_Q2_K},
    {11, "q3_K", 256, 110, TQ_DT_Q3_K},
    {12, "q4_K", 256, 144, TQ_DT_Q4_K},
    {13, "q5_K", 256, 176, TQ_DT_Q5_K},
    {14, "q6_K", 256, 210, TQ_DT_Q6_K},
    {15, "q8_K", 256, 292, NO_DT},
    {16, "iq2_xxs", 256, 66, NO_DT},
    {17, "iq2_xs", 256, 74, NO_DT},
    {18, "iq3_xxs", 256, 98, NO_DT},
    {19, "iq1_s", 256, 50, NO_DT},
    {20, "iq4_nl", 32, 18, TQ_DT_IQ4_NL},
    {21, "iq3_s", 256, 110, NO_DT},
    {22, "iq2_s", 256, 82, NO_DT},
    {23, "iq4_xs", 256, 136, TQ_DT_IQ4_XS},
    {24, "i8", 1, 1, NO_DT},
    {25, "i16", 1, 2, NO_DT},
    {26, "i32", 1, 4, NO_DT},
    {27, "i64", 1, 8, NO_DT},
    {28, "f64", 1, 8, NO_DT},
    {29, "iq1_m", 256, 56, NO_DT},
    {30, "bf16", 1, 2, TQ_DT_BF16},
    {34, "tq1_0", 256, 54, NO_DT},
    {35, "tq2_0", 256, 66, NO_DT},
    {39, "mxfp4", 32, 17, NO_DT},
    {40, "nvfp4", 64, 36, NO_DT},
    {41, "q1_0", 128, 18, NO_DT},
    {42, "q2_0", 64, 18, NO_DT},
};

/* The fork's five types under each of its revisions (a row of lib/fork_revisions.c each: its
 * ids, and the blocks its turbo types are), as tq_ggml_type rows made once; the names are
 * ggml's. */
static tq_ggml_type fork_types[TQ_FORK_MAX_REVISIONS][5];
static pthread_once_t fork_types_once = PTHREAD_ONCE_INIT;

static tq_ggml_type turbo_type(uint32_t rev, int id, uint32_t bits)
{
    static const char *const names[] = {"turbo2", "turbo3", "turbo4"};
    tq_dtype dt = tq_fork_dtype(rev, bits);
    return (tq_ggml_type){id, names[bits - 2], 128, (uint32_t)tq_dtype_block_bytes(dt), (int)dt};
}

static void make_fork_types(void)
{
    for (uint32_t p = 0; p < tq_fork_revision_count(); p++) {
        const tq_fork_revision *r = tq_fork_revision_at(p);
        tq_ggml_type *t = fork_types[p];
        t[0] = turbo_type(p, r->turbo2, 2);
        t[1] = turbo_type(p, r->turbo3, 3);
        t[2] = turbo_type(p, r->turbo4, 4);
        t[3] = (tq_ggml_type){r->tq3_1s, "tq3_1s", 32, 16, TQ_DT_TQ3_1S};
        t[4] = (tq_ggml_type){r->tq4_1s, "tq4_1s", 32, 20, TQ_DT_TQ4_1S};
    }
}

const char *tq_type_profile_name(tq_type_profile p)
{
    if (p == TQ_PROFILE_AUTO) return "auto";
    const tq_fork_revision *r = p >= 0 ? tq_fork_revision_at((uint32_t)p) : NULL;
    return r ? r->name : "?";
}

int tq_type_profile_parse(const char *s, tq_type_profile *out)
{
    for (int p = 0; p < TQ_PROFILE_COUNT; p++)
        if (!strcmp(s, tq_fork_revision_at((uint32_t)p)->name)) {
            *out = p;
            return 0;
        }
    return -1;
}

tq_type_profile tq_type_profile_newest(void)
{
    for (int p = 0; p < TQ_PROFILE_COUNT; p++)
        if (tq_fork_revision_at((uint32_t)p)->flags & TQ_FORK_NEWEST) return p;
    return TQ_PROFILE_DEFAULT;
}

size_t tq_type_profile_list(char *buf, size_t size, int turbo_only)
{
    size_t n = 0;
    int listed = 0;
    for (int p = 0; p < TQ_PROFILE_COUNT; p++) {
        const tq_fork_revision *r = tq_fork_revision_at((uint32_t)p);
        if (turbo_only && r->turbo3 < 0) continue;
        const char *note = "";
        if (p == TQ_PROFILE_DEFAULT) note = " (the default)";
        if (turbo_only) note = p == TQ_PROFILE_NEWEST ? " (the default)" : "";
        int k = snprintf(buf + n, n < size ? size - n : 0, "%s%s%s", listed ? ", " : "",
                         r->name, note);
        n += (size_t)k;
        listed++;
    }
    return n;
}

tq_type_profile tq_type_profile_of_build(const char *build_info)
{
    const char *dash = build_info ? strrchr(build_info, '-') : NULL;
    if (!dash || strlen(dash + 1) < 7) return TQ_PROFILE_AUTO;
    for (int p = 0; p < TQ_PROFILE_COUNT; p++) /* a short hash is a prefix of the commit */
        if (!strncmp(tq_fork_revision_at((uint32_t)p)->name, dash + 1, strlen(dash + 1)))
            return p;
    return TQ_PROFILE_AUTO;
}

const tq_ggml_type *tq_ggml_type_get(tq_type_profile p, int id)
{
    if (p < 0 || p >= TQ_PROFILE_COUNT || id < 0) return NULL;
    pthread_once(&fork_types_once, make_fork_types);
    for (int f = 0; f < 5; f++)
        if (fork_types[p][f].id == id) return &fork_types[p][f];
    if (id > tq_fork_revision_at((uint32_t)p)->last_upstream) return NULL;
    for (size_t i = 0; i < sizeof upstream / sizeof upstream[0]; i++)
        if (upstream[i].id == id) return &upstream[i];
    return NULL;
}

const tq_ggml_type *tq_ggml_type_by_name(tq_type_profile p, const char *name)
{
    for (int id = 0; id < 64; id++) {
        const tq_ggml_type *t = tq_ggml_type_get(p, id);
        if (t && !strcasecmp(t->name, name)) return t;
    }
    return NULL;
}

int tq_ggml_type_id_ambiguous(int id)
{
    const tq_ggml_type *first = NULL;
    for (int p = 0; p < TQ_PROFILE_COUNT; p++) {
        const tq_ggml_type *t = tq_ggml_type_get((tq_type_profile)p, id);
        if (p == 0)
            first = t;
        else if ((t == NULL) != (first == NULL) || (t && strcmp(t->name, first->name)))
            return 1;
    }
    return 0;
}

static const char *const vtype_names[TQ_GGUF_TYPE_COUNT] = {
    "UINT8", "INT8",   "UINT16", "INT16",  "UINT32", "INT32",  "FLOAT32",
    "BOOL",  "STRING", "ARRAY",  "UINT64", "INT64",  "FLOAT64"};
static const uint8_t vtype_sizes[TQ_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *tq_gguf_type_name(tq_gguf_type t)
{
    return (unsigned)t < TQ_GGUF_TYPE_COUNT ? vtype_names[t] : "?";
}
size_t tq_gguf_type_size(tq_gguf_type t)
{
    return (unsigned)t < TQ_GGUF_TYPE_COUNT ? vtype_sizes[t] : 0;
}
