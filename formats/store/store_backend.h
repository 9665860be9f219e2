/* store_backend.h - where a store's entries live (store.h): a table of operations each backend
 * fills, chosen once when the store is opened by the first whose claims() takes the place
 * (store.c's backends list).  A backend sees entries as paths under the store's root
 * (tq_store_path); names, the index, use times and eviction are store.c's and store_*.c's, the
 * same for every backend.  A third backend is one file and one row. */
#ifndef TQ_STORE_BACKEND_H
#define TQ_STORE_BACKEND_H

#include "store.h"

#include <pthread.h>
#include <stdio.h>

/* The names a listing found, before store.c keeps only the ones tq writes. */
typedef struct tq_store_names {
    char **names;
    uint32_t n;
    int failed; /* out of memory */
} tq_store_names;
/* Adds a name (a listing's callback): 1, or 0 when out of memory (failed set). */
int tq_store_names_add(void *user, const char *name, uint64_t size);

/* An entry being written as a stream (tq_store_write_begin). */
struct tq_store_writer {
    const struct tq_store_backend *backend;
    FILE *f;
    char *path;
    void *own; /* the backend's */
    /* with the process's keys (seal.h): what the writer's caller writes is sealed into f */
    struct tq_sealer *sealer;
    FILE *plain;
};

typedef struct tq_store_backend {
    const char *name;
    int remote; /* in an object store (tq_store_remote) */
    int (*claims)(const char *where);
    /* The root cleaned of trailing '/' and checked (made, for a directory). */
    tq_status (*open)(tq_ctx *ctx, tq_store *s);
    tq_status (*put)(tq_ctx *ctx, tq_store *s, const char *entry, const void *p, uint64_t n);
    /* At most max bytes (malloc'd, NUL-terminated); *found 0 when there is none. */
    tq_status (*get)(tq_ctx *ctx, tq_store *s, const char *entry, uint64_t max, char **p,
                     uint64_t *n, int *found);
    /* The names directly under folder/, unfiltered. */
    tq_status (*list)(tq_ctx *ctx, tq_store *s, const char *folder, tq_store_names *l);
    tq_status (*remove)(tq_ctx *ctx, tq_store *s, const char *entry);
    tq_status (*size)(tq_ctx *ctx, tq_store *s, const char *entry, uint64_t *size, int *found);
    tq_status (*write_begin)(tq_ctx *ctx, tq_store *s, const char *entry,
                             struct tq_store_writer *w);
    tq_status (*write_commit)(tq_ctx *ctx, struct tq_store_writer *w);
    void (*write_abort)(struct tq_store_writer *w);
    const char *(*write_error)(const struct tq_store_writer *w);
    /* A stored snapshot's reader (the entry exists as far as the backend can tell). */
    tq_status (*snapshot)(tq_ctx *ctx, tq_store *s, const char *entry,
                          struct tqkv_reader **out);
} tq_store_backend;

extern const tq_store_backend tq_store_dir_backend; /* store_dir.c: a directory */
extern const tq_store_backend tq_store_s3_backend;  /* store_s3.c: s3://bucket/prefix */

/* Readers a store keeps: a restore's candidates at one boundary (store_find.c) at most. */
#define TQ_STORE_KEPT 4

/* The store's root (a directory, or s3://bucket/prefix), malloc'd, as the backend keeps it. */
struct tq_store {
    char *root;
    const tq_store_backend *backend;
    /* an object store's snapshot readers opened for their metadata, kept for the decode that
       follows (tq_store_snapshot_keep), the oldest given up first; the proxy's threads share
       a store */
    pthread_mutex_t kept_mu;
    struct tqkv_reader *kept[TQ_STORE_KEPT];
    char kept_name[TQ_STORE_KEPT][40];
    uint32_t kept_next;
};

/* The most a small entry (an index, use, name or points entry) may hold. */
#define TQ_STORE_ENTRY_MOST (64u << 10)

#endif
