/*
 * slot_session.h - a llama-server slot kept in a snapshot store and brought back: what `tq slot
 * save`, `tq slot restore` and `tq slot proxy` share (STORE.md, "Sessions").  A save asks the
 * server to write the slot into its --slot-save-path, encodes the file into the store (appended
 * to the longest stored snapshot it extends), and removes it; a restore finds the stored
 * snapshot with the longest restore point a prompt begins with, decodes it to that point into
 * the server's folder, asks the server to restore it, and removes the file.  Nothing here
 * prints: notes and warnings go to the session's note callback, a line each; errors are a
 * tq_status and the context's message.
 */
#ifndef TQ_SLOT_SESSION_H
#define TQ_SLOT_SESSION_H

#include "gguf.h"
#include "kv_plan.h"
#include "llama_server.h"
#include "store.h"

#include <stdint.h>

/* A note or warning for the log: one line, without its newline. */
typedef void (*tq_slot_note_fn)(void *user, const char *line);

/* What a session with one server holds: set by the caller, then tq_slot_session_model. */
typedef struct tq_slot_session {
    llama_server srv;       /* the server and its requests' timeout */
    const char *slot_dir;   /* the server's --slot-save-path */
    tq_store *store;        /* the snapshot store */
    tq_kvsnap_preset preset;
    int threads;            /* 0: all cores */
    int has_profile;        /* profile given (--fork-rev): else the server's build names it */
    tq_type_profile profile;
    tq_slot_note_fn note;   /* NULL: notes are dropped */
    void *note_user;
    void (*on_progress)(void *user, uint64_t done, uint64_t total);
    void *progress_user;
    /* set by tq_slot_session_model */
    char *model_path;    /* malloc'd */
    uint64_t fp;         /* the model as names hold it (tq_store_model_id) */
    uint32_t swa_window; /* the model's sliding window (0: none) */
    uint32_t swa_head;   /* the sliding layers' K head size (0: not known) */
    int exact_points;    /* restores only where saved: a sliding window or a recurrent state */
    uint32_t head_k;     /* the K head size (0: not known) */
    /* the server's K and V cache types where a restore has to convert to them ("f16", "q8_0",
     * ...; "" as stored): learned by tq_slot_probe_types when the server refused a restore */
    char cache_k[16], cache_v[16];
} tq_slot_session;

/* The server's model (model, or /props' model_path when NULL) and its fingerprint. */
tq_status tq_slot_session_model(tq_ctx *ctx, tq_slot_session *ss, const char *model);
void tq_slot_session_free(tq_slot_session *ss);

/* Monotonic seconds: what the reports' times are measured by. */
double tq_slot_now(void);
/* A note for the session's log (its note callback), printf-formatted. */
void tq_slot_note(const tq_slot_session *ss, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The TurboQuant+ fork revision the server runs: the session's, else the one its build names
 * (/props build_info), else TQ_PROFILE_AUTO (told from a slot file's bytes). */
tq_type_profile tq_slot_server_revision(tq_ctx *ctx, const tq_slot_session *ss);

/* A slot file's name in the server's folder that no other save or restore uses: file (the
 * name the server is given) and path (slot_dir/file), both tracked as temporaries. */
void tq_slot_raw_name(const tq_slot_session *ss, const char *what, char *file, size_t file_size,
                      char *path, size_t path_size);

/* A slot file and its checkpoint sidecar (PATH.ckpt) removed and forgotten as temporaries. */
void tq_slot_remove_raw(const char *path);

/* What a save did. */
typedef struct tq_slot_saved {
    uint32_t n_tokens;
    char name[40];       /* the snapshot stored (or found stored already) */
    char base[40];       /* the snapshot it was appended to ("" whole) */
    int already;         /* stored already: only its use recorded */
    int checkpoints;     /* the server's checkpoints kept with it */
    uint64_t bytes;      /* the snapshot's bytes (0 when stored already) */
    int32_t *tokens;     /* its tokens (malloc'd, n_tokens; the caller frees them) */
    double raw_s;        /* the server's save */
    double store_s;      /* the encode and the store's writes */
} tq_slot_saved;

/* The server saves slot into path (tq_slot_raw_name's file): the only step that holds the
 * slot.  A file that did not appear there, or is not a regular file, is an error (and
 * removed). */
tq_status tq_slot_save_raw(tq_ctx *ctx, const tq_slot_session *ss, long slot, const char *file,
                           const char *path, tq_slot_saved *rep);
/* The raw slot file at path encoded into the store (and alias, when not NULL, naming it), then
 * removed with its checkpoint sidecar, whatever happens; rep->tokens to be freed. */
tq_status tq_slot_store_raw(tq_ctx *ctx, const tq_slot_session *ss, const char *path,
                            const char *alias, tq_slot_saved *rep);
/* Both: tq slot save (rep->tokens to be freed). */
tq_status tq_slot_save(tq_ctx *ctx, const tq_slot_session *ss, long slot, const char *alias,
                       tq_slot_saved *rep);

/* What a restore found and did. */
typedef struct tq_slot_restored {
    uint32_t n_prompt;   /* the prompt's tokens */
    uint32_t point;      /* tokens restored (0: a miss) */
    uint32_t shared;     /* the most tokens a stored snapshot shared with the prompt */
    char name[40];       /* the snapshot restored from */
    double find_s, decode_s, restore_s;
    char file[128];      /* the decoded slot file: its name for the server */
    char path[4096];     /* and its path (tq_slot_raw_name) */
} tq_slot_restored;

/* The tokens a user's name (names/ALIAS) stands for (malloc'd): a snapshot of another model
 * or a name of none is an error. */
tq_status tq_slot_named_tokens(tq_ctx *ctx, const tq_slot_session *ss, const char *alias,
                               int32_t **tokens, uint32_t *n);
/* The stored snapshot with the longest restore point that tokens[0..n) begin with, beyond
 * `have` tokens (what the slot holds already: a point at or below it is no gain), decoded to
 * that point as a slot file in the server's folder (rep->file, rep->path); rep->point 0: none
 * (a miss, TQ_OK, no file).  A stored snapshot that turns out corrupt gives way to the
 * next-best (a few tries).  The store's part of a restore: it holds no slot. */
tq_status tq_slot_restore_prepare(tq_ctx *ctx, const tq_slot_session *ss, const int32_t *tokens,
                                  uint32_t n, uint32_t have, tq_slot_restored *rep);
/* The prepared file restored into slot by the server, then removed (rep->point 0 where the
 * server refused it). */
tq_status tq_slot_restore_apply(tq_ctx *ctx, const tq_slot_session *ss, long slot,
                                tq_slot_restored *rep);
/* A prepared file not restored: removed. */
void tq_slot_restore_discard(tq_slot_restored *rep);
/* The K and V cache types the server's slot holds (into ss->cache_k, cache_v): the prompt's
 * first token processed into slot and the slot saved (the slot's cells are replaced: only
 * for a slot about to be restored into). */
tq_status tq_slot_probe_types(tq_ctx *ctx, tq_slot_session *ss, long slot, int32_t token);
/* Both: tq slot restore; a restore the server refuses is tried once more converted to the
 * cache types the server's slot holds (tq_slot_probe_types), which ss keeps. */
tq_status tq_slot_restore(tq_ctx *ctx, tq_slot_session *ss, long slot, const int32_t *tokens,
                          uint32_t n, uint32_t have, tq_slot_restored *rep);

#endif
