/* kv_numpy_impl.h - what the NumPy dump reader (kv_numpy.c) and the .npz
 * writer (kv_numpy_write.c) share: the arrays of a NumPy image, which a
 * NumPy view keeps as its source data. */
#ifndef TQ_KV_NUMPY_IMPL_H
#define TQ_KV_NUMPY_IMPL_H

#include "kv_source.h"
#include "npy.h"

#define IMG_HDR     16
#define MAX_NAME    4096
#define MAX_LAYERS  4096
#define MAX_ENTRIES 65536

enum { ROLE_OTHER = 0, ROLE_K, ROLE_V, ROLE_STACK, ROLE_TOKENS };

typedef struct np_entry {
    char *name; /* as stored (".npy" included for npz members) */
    tq_npy_header h;
    uint64_t member_off; /* of the .npy header in the image */
    uint64_t data_off, data_len;
    int role, head_major;
    uint32_t layer;
    uint64_t cells, heads, head_dim, width; /* K/V: per tensor */
} np_entry;

typedef struct tq_numpy_info {
    uint32_t n;
    np_entry *e;
    uint32_t n_layer;
} tq_numpy_info;

/* [heads, cells, head_dim] <-> [cells, heads, head_dim] for one tensor, in
 * place; -1 when out of memory. */
int tq_np_permute(uint8_t *p, uint64_t cells, uint64_t heads, uint64_t hd, uint64_t es,
                  int to_cell_major);
/* The tensors of a K/V entry (one, or 2 x layers for a stack) and the bytes
 * of each. */
uint64_t tq_np_n_tensors(const np_entry *e);
uint64_t tq_np_tensor_bytes(const np_entry *e);
int tq_np_is_float(const tq_npy_header *h); /* <f4 or <f2 */

#endif
