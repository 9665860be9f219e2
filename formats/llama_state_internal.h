/* llama_state_internal.h - the KV view's representation, shared by the
 * state-file reader (llama_state.c) and the NumPy dump reader
 * (kv_numpy.c), which both produce a tq_llama_state. */
#ifndef TQ_LLAMA_STATE_INTERNAL_H
#define TQ_LLAMA_STATE_INTERNAL_H

#include "llama_state.h"

#define MAX_KV_STATES 2 /* iSWA: base cache then SWA cache */

typedef struct tq_numpy_info tq_numpy_info; /* kv_numpy.c */

struct tq_llama_state {
    const uint8_t *map;
    uint64_t size;
    int mapped;        /* map is an mmap of the file */
    int owned;         /* map is malloc'd (a NumPy image) */
    char *label;
    tq_state_kind kind;
    uint32_t version, n_tokens;
    int32_t *tokens;
    char *arch;
    int has_outputs, has_ext;
    uint64_t prefix_len;
    uint32_t n_kv;
    tq_kv_state kv[MAX_KV_STATES];
    tq_type_profile profile;
    tq_numpy_info *numpy; /* TQ_STATE_NUMPY: the image's arrays */
};

/* The NumPy image (TQNI, NUMPY.md) in s->map: fills the KV view. */
tq_status tq_numpy_image_parse(tq_ctx *ctx, tq_llama_state *s);
void tq_numpy_info_free(tq_numpy_info *n);
int tq_numpy_is_dump(const uint8_t *p, uint64_t size);
/* Reads a .npy or .npz dump into a malloc'd NumPy image (at most max_bytes
 * of array data; 0 = no limit). */
tq_status tq_numpy_build_image(tq_ctx *ctx, const uint8_t *p, uint64_t size, const char *label, uint64_t max_bytes,
                               uint8_t **img, uint64_t *img_size);

#endif
