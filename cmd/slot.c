/* slot.c - tq slot: llama-server's slots kept in a snapshot store (formats/store/store.h) and
 * brought back: save (the server saves the slot, tq encodes it into the store, appended to the
 * longest stored snapshot it extends, and removes the raw file), restore (the stored snapshot
 * that shares the longest prefix with a prompt, decoded to that prefix, restored by the
 * server), ls. */
#include "cli.h"
#include "ckpt.h"
#include "cli_opts.h"
#include "file_io.h"
#include "gguf.h"
#include "kv_snapshot.h"
#include "llama_server.h"
#include "model.h"
#include "output.h"
#include "progress.h"
#include "store.h"
#include "tqkv.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void help_slot(void)
{
    printf(
        "usage: tq slot save    --slot-dir DIR --store STORE [--server URL] [--slot N]\n"
        "                       [--model M.gguf] [--name NAME] [--preset P] [--quiet]\n"
        "       tq slot restore --slot-dir DIR --store STORE (--prompt FILE | --name NAME)\n"
        "                       [--server URL] [--slot N] [--model M.gguf] [--quiet]\n"
        "       tq slot ls STORE [--json]\n"
        "       tq slot gc STORE --max-size SIZE\n\n"
        "Keeps llama-server's slots in a snapshot store (a directory many servers share):\n"
        "save asks the server to save slot N into its --slot-save-path (DIR), encodes the file\n"
        "into the store under a name made of the model's fingerprint and the tokens' hash\n"
        "(appended to the longest stored snapshot whose tokens it extends), and removes the\n"
        "file (and a fork build's checkpoint sidecar, FILE.ckpt, kept with the snapshot).\n"
        "restore finds the stored snapshot with the longest restore point the prompt begins\n"
        "with (an index at every 256 tokens; the winner's tokens compared exactly), decodes it\n"
        "to that point into DIR, asks the server to restore it, and removes the file.  A\n"
        "restore point is a count where every cache is whole: any count on dense models; on\n"
        "sliding-window and hybrid models the count a session was saved at (llama.cpp keeps\n"
        "only the last window and the recurrent state's end) and its checkpoints' counts.\n"
        "No stored restore point in the prompt is a miss: one line, exit status 3, the server\n"
        "left as it was (it processes the whole prompt).\n\n"
        "  --server URL     the server (default http://127.0.0.1:8080)\n"
        "  --slot N         its slot (default 0)\n"
        "  --slot-dir DIR   the server's --slot-save-path\n"
        "  --store STORE    the store's directory\n"
        "  --model M.gguf   the server's model (default: /props' model_path)\n"
        "  --fork-rev REV   save: the TurboQuant+ fork revision of a turbo cache (default: the\n"
        "                   one /props' build_info names, else told from the slot file)\n"
        "  --prompt FILE    restore: the prompt's text, tokenized by the server\n"
        "  --name NAME      save: a name for the snapshot too; restore: the snapshot of that name\n"
        "                   (1 to 128 of A-Z a-z 0-9 . _ -, not beginning with '.': a name,\n"
        "                   never a path)\n"
        "  --timeout S      the most a save, restore or tokenization may take (default 600 s;\n"
        "                   any request is given up after 30 s without a byte)\n"
        "  --preset P       save: balanced (default), small, q8 or lossless\n"
        "  --json           ls: JSON on stdout\n"
        "  --max-size SIZE  gc: evict the least recently used snapshots until the store holds\n"
        "                   at most SIZE (bytes, or 500M, 20G: powers of 1024); a base goes\n"
        "                   only after every snapshot appended to it\n");
}

typedef struct slot_opts {
    cli_common c;
    const char *pos[2];
    const char *server, *slot_dir, *store, *prompt, *name, *preset;
    long slot;
    long timeout;      /* --timeout: seconds a save, restore or tokenization may take */
    uint64_t max_size; /* gc: --max-size in bytes */
    int has_max_size;
} slot_opts;

/* --max-size SIZE: bytes, or with K, M, G or T (powers of 1024; "B" or "iB" may follow). */
static int parse_size(void *user, const char *v)
{
    slot_opts *o = user;
    char *end;
    double x = strtod(v, &end);
    static const char units[] = "KMGT";
    const char *u = *end ? strchr(units, *end) : NULL;
    if (u) x *= (double)(1ull << (10 * (u - units + 1)));
    if (u) end++;
    if (!strcmp(end, "B") || !strcmp(end, "iB")) end += strlen(end);
    if (end == v || *end || !(x >= 0) || x > 1e18)
        return cli_usage_error("--max-size: '%s' is not a size (bytes, or 500M, 20G, ...)", v);
    o->max_size = (uint64_t)x;
    o->has_max_size = 1;
    return 0;
}

static const char *const actions[] = {"save", "restore", "ls", "gc", NULL};

static int parse(int argc, char **argv, slot_opts *o)
{
    const cli_opt own[] = {
        CLI_OPT_STR("--server", &o->server),
        CLI_OPT_LONG("--slot", &o->slot, 0, 65535),
        CLI_OPT_LONG("--timeout", &o->timeout, 1, 86400),
        CLI_OPT_STR("--slot-dir", &o->slot_dir),
        CLI_OPT_STR("--store", &o->store),
        CLI_OPT_STR("--prompt", &o->prompt),
        CLI_OPT_STR("--name", &o->name),
        CLI_OPT_FN("--max-size", parse_size, o),
        CLI_OPT_CHOICE("--preset", &o->preset, tq_kvsnap_preset_names,
                       "--preset: '%s' is not balanced, lossless, q8 or small"),
        {NULL},
    };
    const cli_spec spec = {"slot", CLI_QUIET | CLI_JSON | CLI_THREADS | CLI_MODEL | CLI_PROFILE,
                           own, 2};
    int n = 0;
    int rc = cli_parse(&spec, argc, argv, &o->c, o->pos, &n);
    if (rc) return rc;
    int a = 0;
    while (o->pos[0] && actions[a] && strcmp(actions[a], o->pos[0])) a++;
    if (!o->pos[0] || !actions[a])
        return cli_usage_error("save, restore or ls? (see tq help slot)");
    if (!o->server) o->server = "http://127.0.0.1:8080";
    if (!o->timeout) o->timeout = 600;
    if (a >= 2) {
        if (!o->pos[1]) return cli_usage_error("%s: which store?", o->pos[0]);
        if (a == 3 && !o->has_max_size) return cli_usage_error("gc: give --max-size SIZE");
        o->store = o->pos[1];
        return 0;
    }
    if (o->pos[1]) return cli_usage_error("%s: unexpected '%s'", o->pos[0], o->pos[1]);
    if (o->name && !tq_store_name_ok(o->name))
        return cli_usage_error("--name: not a name (1 to %u of A-Z a-z 0-9 . _ -, not beginning "
                               "with '.'; names are data, never paths)",
                               TQ_STORE_NAME_MAX);
    if (!o->slot_dir || !o->store)
        return cli_usage_error("%s needs --slot-dir (the server's --slot-save-path) and --store",
                               o->pos[0]);
    if (a == 1 && !o->prompt == !o->name)
        return cli_usage_error("restore: give --prompt FILE or --name NAME");
    return 0;
}

static void show_progress(void *user, uint64_t done, uint64_t total)
{
    progress_update(user, done, total, "K/V bytes");
}

/* What a save or restore holds open. */
typedef struct slot_run {
    tq_ctx *ctx;
    llama_server srv;
    tq_store *store;
    char *model_path;
    uint64_t fp;
    uint32_t swa_window; /* the model's sliding window (0: none) */
    uint32_t swa_head;   /* the sliding layers' K head size (0: not known) */
    char raw[4096];      /* the slot file in the server's folder */
} slot_run;

/* The server's model and its fingerprint: 0 or an exit code. */
static int open_model(slot_run *r, const slot_opts *o)
{
    tq_gguf *g;
    if (o->c.model) r->model_path = strdup(o->c.model);
    if (!o->c.model && llama_server_model(r->ctx, &r->srv, &r->model_path))
        return cli_lib_error(r->ctx);
    if (!r->model_path) return cli_runtime_error("out of memory");
    tq_model m;
    if (tq_gguf_open(r->ctx, r->model_path, NULL, &g)) return cli_lib_error(r->ctx);
    r->fp = tq_model_fingerprint(g);
    if (!tq_model_read(r->ctx, g, &m)) {
        r->swa_window = m.swa_window;
        r->swa_head = m.head_k_swa ? m.head_k_swa : m.head_k;
        tq_model_free(&m);
    }
    tq_gguf_close(g);
    return 0;
}

/* A file name in the server's folder no other save or restore uses. */
static void raw_name(slot_run *r, const slot_opts *o, const char *what, char *file, size_t n)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(file, n, "tq-%s-%d-%ld%09ld.bin", what, (int)getpid(), (long)ts.tv_sec, ts.tv_nsec);
    snprintf(r->raw, sizeof r->raw, "%s/%s", o->slot_dir, file);
    tq_temp_track(r->raw); /* a signal removes it (and its sidecar) as tq's other temporaries */
    char side[4200];
    snprintf(side, sizeof side, "%s.ckpt", r->raw);
    tq_temp_track(side);
}

/* The snapshot options of --preset and --threads. */
static void snapshot_options(const slot_opts *o, tq_kvsnap_options *so)
{
    *so = (tq_kvsnap_options)TQ_KVSNAP_OPTIONS_INIT;
    so->preset = (tq_kvsnap_preset)cli_choice_index(tq_kvsnap_preset_names, o->preset, 0);
    so->threads = (int)o->c.threads;
}

/* The TurboQuant+ fork revision the server runs: the one --fork-rev names, else the one its
 * build names (/props build_info), else TQ_PROFILE_AUTO (a save tells it from the slot file's
 * bytes; a restore writes turbo rows for the newest). */
static tq_type_profile server_revision(slot_run *r, const slot_opts *o)
{
    char build[128];
    if (o->c.profile_name) return o->c.profile;
    if (llama_server_build(r->ctx, &r->srv, build, sizeof build)) return TQ_PROFILE_AUTO;
    return tq_type_profile_of_build(build);
}

/* Encodes the slot file into the store as name (appended to base when base->common): 0, an
 * exit code, or -1 when the encode onto the base failed (nothing printed, nothing stored). */
static int encode_once(slot_run *r, const slot_opts *o, tq_kv_view *v, const char *name,
                       const tq_store_match *base, tq_kvsnap_report *rep)
{
    char entry[96];
    tq_gguf *g = NULL;
    tq_model model;
    tqkv_reader *b = NULL;
    tq_kvsnap_options so;
    snapshot_options(o, &so);
    int rc = 0;
    if (tq_gguf_open(r->ctx, r->model_path, NULL, &g) || tq_model_read(r->ctx, g, &model)) {
        tq_gguf_close(g);
        return cli_lib_error(r->ctx);
    }
    so.model = &model;
    char base_file[64];
    if (base->common) {
        tq_store_entry(TQ_STORE_SNAP, base->name, entry, sizeof entry);
        snprintf(base_file, sizeof base_file, "%s.tqkv", base->name);
        char *path = tq_store_path(r->store, entry);
        int gone = !path || cli_open_snapshot_mapped(r->ctx, path, &b);
        free(path);
        if (gone) { /* evicted since it was found: stored whole (encode) */
            tq_model_free(&model);
            tq_gguf_close(g);
            return -1;
        }
        so.base = b;
        so.base_name = base_file;
    }
    tq_store_entry(TQ_STORE_SNAP, name, entry, sizeof entry);
    char *out_path = tq_store_path(r->store, entry);
    cli_out out;
    const char *inputs[1] = {r->raw};
    progress pr;
    progress_init(&pr, o->c.quiet);
    so.on_progress = show_progress;
    so.progress_user = &pr;
    if (!rc) rc = out_path ? cli_out_open(&out, out_path, inputs, 1) : 1;
    tq_status failed = rc ? TQ_OK : tq_kvsnap_encode(r->ctx, v, &so, out.f, rep);
    progress_end(&pr);
    if (failed == TQ_ERR_IO) { /* the store's side: a full disk, a folder gone */
        rc = cli_runtime_error("%s: %s", cli_out_error(&out) ? cli_out_error(&out) : out_path,
                               tq_ctx_error(r->ctx));
        cli_out_abort(&out);
    } else if (failed && cli_out_error(&out)) {
        rc = cli_runtime_error("%s", cli_out_error(&out));
        cli_out_abort(&out);
    } else if (failed && so.base) {
        rc = -1;
        cli_out_abort(&out);
    } else if (failed) {
        rc = cli_runtime_error("%s: %s", r->raw, tq_ctx_error(r->ctx));
        cli_out_abort(&out);
    } else if (!rc) {
        rc = cli_out_commit(&out);
    }
    free(out_path);
    tqkv_close(b);
    tq_model_free(&model);
    tq_gguf_close(g);
    return rc;
}

/* The same; where the state does not fit its base (another coding, a cache that moved
 * otherwise than appending), the snapshot is stored whole, with a note: a save never fails
 * for a base. */
static int encode(slot_run *r, const slot_opts *o, tq_kv_view *v, const char *name,
                  tq_store_match *base, tq_kvsnap_report *rep)
{
    int rc = encode_once(r, o, v, name, base, rep);
    if (rc != -1) return rc;
    cli_log("note: %s does not append to %s (%s): stored whole", name, base->name,
            tq_ctx_error(r->ctx));
    base->common = 0;
    return encode_once(r, o, v, name, base, rep);
}

/* The server's checkpoint sidecar beside the slot file (a fork build's), checked and put in
 * the store as ckpt/NAME; its counts into pt.  One that does not check out is left out with
 * a warning: the snapshot itself is what was asked for. */
static int save_checkpoints(slot_run *r, const slot_opts *o, const tq_kv_view *v,
                            const char *name, tq_store_points *pt)
{
    char side[4200];
    struct stat sb;
    int kept;
    tq_kvsnap_options so;
    snapshot_options(o, &so);
    so.head_dim = (int)r->swa_head; /* the partial states are the sliding layers' */
    tq_kvsnap_ckpt_coding coding = {r->ctx, &so, tq_kv_view_tokens(v), tq_kv_view_n_tokens(v),
                                    tq_kv_view_version(v)};
    snprintf(side, sizeof side, "%s.ckpt", r->raw);
    /* checkpoints hold a window or a recurrent state each: well under the slot file 64 times */
    uint64_t limit = stat(r->raw, &sb) ? 0 : 64ull * (uint64_t)sb.st_size + (1u << 20);
    if (tq_store_keep_checkpoints(r->ctx, r->store, name, side, limit, tq_kv_view_n_tokens(v),
                                  tq_kvsnap_ckpt_code, &coding, pt, &kept))
        return cli_lib_error(r->ctx);
    if (kept < 0)
        cli_log("warning: the server's checkpoint sidecar: %s: not kept", tq_ctx_error(r->ctx));
    return 0;
}

/* A gc racing this save may have evicted the base before it saw the new link (it keeps a
 * base it sees a new dependent of, store_gc.c): the base checked after the write, and where it
 * is gone the snapshot written again whole, so no chain is left without its base. */
static int keep_chain_whole(slot_run *r, const slot_opts *o, tq_kv_view *v, const char *name,
                            tq_store_match *base, tq_kvsnap_report *rep)
{
    char entry[64];
    tq_store_entry(TQ_STORE_SNAP, base->name, entry, sizeof entry);
    if (!tq_store_check_entry(r->ctx, r->store, entry)) return 0;
    cli_log("note: %s: its base %s was evicted meanwhile: stored whole", name, base->name);
    base->common = 0;
    return encode(r, o, v, name, base, rep);
}

static int do_save(slot_run *r, const slot_opts *o)
{
    char file[128];
    char name[40];
    char side[4200];
    uint32_t n_saved = 0;
    uint32_t skipped = 0;
    tq_kv_view *v = NULL;
    tq_store_match base;
    tq_kvsnap_report rep = {0};
    double t0 = cli_now();
    raw_name(r, o, "save", file, sizeof file);
    snprintf(side, sizeof side, "%s.ckpt", r->raw);
    if (llama_server_slot(r->ctx, &r->srv, o->slot, "save", file, &n_saved)) {
        unlink(r->raw); /* whatever the server wrote before it failed */
        unlink(side);
        return cli_lib_error(r->ctx);
    }
    struct stat sb;
    if (access(r->raw, R_OK))
        return cli_runtime_error("the server saved slot %ld, but not into %s: give its "
                                 "--slot-save-path as --slot-dir",
                                 o->slot, o->slot_dir);
    if (lstat(r->raw, &sb) || !S_ISREG(sb.st_mode)) { /* a link planted there: not followed */
        unlink(r->raw);
        unlink(side);
        return cli_runtime_error("%s: the server's slot file is not a regular file", r->raw);
    }
    int rc = tq_kv_view_open(r->ctx, r->raw, server_revision(r, o), &v) ? cli_lib_error(r->ctx)
                                                                         : 0;
    const int32_t *tokens = rc ? NULL : tq_kv_view_tokens(v);
    uint32_t n = rc ? 0 : tq_kv_view_n_tokens(v);
    tq_store_points pt = {0};
    if (!rc) {
        tq_kv_points vp;
        tq_kv_view_restore_points(v, &vp);
        pt.from = vp.from;
        pt.recurrent = vp.recurrent;
        tq_store_name(r->fp, tokens, n, name);
    }
    if (!rc && tq_store_find_base(r->ctx, r->store, r->fp, tokens, n, &base, &skipped))
        rc = cli_lib_error(r->ctx);
    if (!rc && skipped) cli_log("warning: %u stored snapshots could not be read", skipped);
    if (!rc && !strcmp(base.name, name)) { /* stored already: used again */
        rc = tq_store_touch(r->ctx, r->store, name) ? cli_lib_error(r->ctx) : 0;
    } else if (!rc) {
        rc = encode(r, o, v, name, &base, &rep);
        /* checkpoints and points before the index: whoever finds the snapshot finds them */
        if (!rc) rc = save_checkpoints(r, o, v, name, &pt);
        if (!rc && tq_store_put_points(r->ctx, r->store, name, &pt)) rc = cli_lib_error(r->ctx);
        if (!rc && tq_store_index(r->ctx, r->store, r->fp, name, tokens, n))
            rc = cli_lib_error(r->ctx);
        if (!rc && base.common) rc = keep_chain_whole(r, o, v, name, &base, &rep);
    }
    if (!rc && o->name) {
        char entry[300];
        tq_store_entry(TQ_STORE_NAME, o->name, entry, sizeof entry);
        if (tq_store_put(r->ctx, r->store, entry, name, strlen(name))) rc = cli_lib_error(r->ctx);
    }
    tq_kv_view_close(v);
    unlink(r->raw);
    unlink(side);
    if (!rc && !o->c.quiet)
        cli_log("slot %ld: %u tokens stored as %s%s%s (%.2f MB%s) in %.2f s", o->slot, n, name,
                base.common && strcmp(base.name, name) ? ", appended to " : "",
                base.common && strcmp(base.name, name) ? base.name : "", rep.snapshot_bytes / 1e6,
                pt.n_checkpoints ? ", with the server's checkpoints" : "", cli_now() - t0);
    return rc;
}

/* The prompt's tokens: the text of --prompt through the server's tokenizer, or the tokens of
 * the snapshot --name names (*name set to it). */
static int prompt_tokens(slot_run *r, const slot_opts *o, int32_t **tokens, uint32_t *n,
                         char *name)
{
    char *text;
    uint64_t len;
    int found;
    if (o->name) {
        char entry[300];
        tq_store_entry(TQ_STORE_NAME, o->name, entry, sizeof entry);
        if (tq_store_get(r->ctx, r->store, entry, &text, &len, &found))
            return cli_lib_error(r->ctx);
        /* the entry names a snapshot, or it names none */
        int named = found && tq_store_is_snapshot_name(text);
        if (named) snprintf(name, 40, "%s", text);
        free(text);
        if (!named) return cli_runtime_error("%s: no snapshot named '%s'", o->store, o->name);
        if (strtoull(name, NULL, 16) != r->fp)
            return cli_runtime_error("%s: '%s' is a snapshot of another model (fingerprint "
                                     "%.16s; the server's model has %016" PRIx64 ")",
                                     o->store, o->name, name, r->fp);
        tqkv_reader *s;
        if (tq_store_snapshot(r->ctx, r->store, name, &s)) return cli_lib_error(r->ctx);
        *n = tqkv_meta_of(s)->n_tokens;
        *tokens = malloc(4ull * *n + 4);
        if (*tokens) memcpy(*tokens, tqkv_meta_of(s)->tokens, 4ull * *n);
        tqkv_close(s);
        return *tokens ? 0 : cli_runtime_error("out of memory");
    }
    FILE *f = fopen(o->prompt, "rb");
    if (!f) return cli_runtime_error("%s: cannot open the prompt", o->prompt);
    text = NULL;
    len = 0;
    char buf[65536];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) {
        char *t = realloc(text, len + k + 1);
        if (!t) break;
        memcpy(t + len, buf, k);
        text = t;
        len += k;
        text[len] = 0;
    }
    fclose(f);
    if (!text) return cli_runtime_error("%s: an empty prompt", o->prompt);
    int rc = llama_server_tokenize(r->ctx, &r->srv, text, tokens, n) ? cli_lib_error(r->ctx) : 0;
    free(text);
    return rc;
}

/* A base name as an appended snapshot records it: NAME.tqkv of a stored snapshot's NAME. */
static int base_name_ok(const char *file)
{
    char name[40];
    size_t n = strlen(file);
    if (n != 38 || strcmp(file + 33, ".tqkv")) return 0;
    snprintf(name, sizeof name, "%.33s", file);
    return tq_store_is_snapshot_name(name);
}

/* The stored snapshot's first `tokens` tokens into the server's folder as a slot file. */
static int decode(slot_run *r, const slot_opts *o, const char *name, uint32_t tokens,
                  const tq_store_ckpts *k, tq_status *why)
{
    char entry[96];
    tqkv_reader *s = NULL;
    tqkv_reader *base = NULL;
    tq_store_entry(TQ_STORE_SNAP, name, entry, sizeof entry);
    char *path = tq_store_path(r->store, entry);
    /* an object by ranges: a prefix's chunks alone are fetched */
    int rc = !path || cli_open_snapshot(r->ctx, path, 0, &s) ? cli_lib_error(r->ctx) : 0;
    const tqkv_meta *m = rc ? NULL : tqkv_meta_of(s);
    if (!rc && m->base_id && !base_name_ok(m->base_name))
        rc = cli_runtime_error("%s: names a base that is not a stored snapshot's", path);
    if (!rc && m->base_id) { /* an appended snapshot: its base beside it, read whole */
        tq_store_entry(TQ_STORE_SNAP_FILE, m->base_name, entry, sizeof entry);
        char *bp = tq_store_path(r->store, entry);
        if (!bp || cli_open_snapshot_mapped(r->ctx, bp, &base)) {
            /* a chain whose base is gone: the next-best prefix (do_restore) */
            rc = cli_runtime_error("%s: its base %s: %s", path, m->base_name,
                                   tq_ctx_error(r->ctx));
            *why = TQ_ERR_CORRUPT;
        }
        free(bp);
    }
    cli_out out;
    const char *inputs[1] = {path};
    if (!rc) rc = cli_out_open_ex(&out, r->raw, inputs, 1, 0);
    if (!rc) {
        progress pr;
        progress_init(&pr, o->c.quiet);
        tq_type_profile rev = server_revision(r, o);
        if (rev == TQ_PROFILE_AUTO) rev = TQ_PROFILE_NEWEST;
        tq_kvsnap_decode_options d = {.threads = (int)o->c.threads,
                                      .fork_rev = tq_type_profile_name(rev),
                                      .on_progress = show_progress,
                                      .progress_user = &pr};
        /* two masked cells below a window-only cache: the server's check passes when the
         * prompt ends where the snapshot does as well (llama_state.h, pad_window) */
        tq_kvsnap_restore_options ro = {.format = (tq_kv_kind)m->source_kind,
                                        .tokens = tokens < m->n_tokens ? tokens : 0,
                                        .tmp_near = r->raw,
                                        .pad_window = 2,
                                        .partial = k->partial,
                                        .partial_len = k->partial_len};
        *why = tq_kvsnap_restore(r->ctx, s, base, &d, &ro, out.f);
        progress_end(&pr);
        if (*why) {
            rc = cli_runtime_error("%s: %s", path, tq_ctx_error(r->ctx));
            cli_out_abort(&out);
        } else {
            rc = cli_out_commit(&out);
        }
    }
    free(path);
    tqkv_close(base);
    tqkv_close(s);
    return rc;
}

/* Tries a restore may take: a stored snapshot that fails to decode (corrupt where its index
 * did not show it: an object's chunks arrive only then) gives way to the next-best prefix. */
enum { RESTORE_TRIES = 3 };

/* What a miss says: why no stored prefix restores. */
static int miss(const slot_opts *o, const tq_store_match *best, uint32_t n)
{
    if (o->c.quiet) return TQ_EXIT_MISS;
    if (best->shared >= TQ_STORE_STRIDE)
        cli_log("slot %ld: miss: stored snapshots share up to %u of the prompt's %u tokens, but "
                "none restores there (a sliding-window cache keeps its last window, a recurrent "
                "state its end; a fork build's checkpoints add restore points); the server "
                "will process the whole prompt",
                o->slot, best->shared, n);
    else
        cli_log("slot %ld: miss: no stored snapshot of this model shares the prompt's first %u "
                "tokens; the server will process the whole prompt",
                o->slot, TQ_STORE_STRIDE);
    return TQ_EXIT_MISS;
}

static int do_restore(slot_run *r, const slot_opts *o)
{
    char file[128];
    char side[4200] = "";
    char named[40] = "";
    char failed[RESTORE_TRIES][40];
    const char *except[RESTORE_TRIES];
    int32_t *tokens = NULL;
    uint32_t n = 0;
    uint32_t skipped = 0;
    uint32_t n_restored = 0;
    tq_store_match best = {0};
    tq_store_ckpts k = {0};
    double t0 = cli_now();
    int rc = prompt_tokens(r, o, &tokens, &n, named);
    for (uint32_t t = 0; !rc && t < RESTORE_TRIES; t++) {
        if (tq_store_find(r->ctx, r->store, r->fp, tokens, n, except, t, &best, &skipped)) {
            rc = cli_lib_error(r->ctx);
            break;
        }
        if (skipped) cli_log("warning: %u stored snapshots could not be read; skipped", skipped);
        if (!best.point) break;
        tq_store_points pt;
        tq_store_ckpts_free(&k);
        tq_kvsnap_ckpt_coding coding = {r->ctx, NULL, NULL, 0, 0};
        if (tq_store_get_points(r->ctx, r->store, best.name, best.n_tokens, &pt) ||
            (pt.n_checkpoints &&
             tq_store_load_checkpoints(r->ctx, r->store, best.name, best.n_tokens,
                                       best.point < pt.from ? best.point : 0,
                                       tq_kvsnap_ckpt_decode, &coding, &k))) {
            rc = cli_lib_error(r->ctx);
            break;
        }
        raw_name(r, o, "restore", file, sizeof file);
        snprintf(side, sizeof side, "%s.ckpt", r->raw);
        tq_status why = TQ_OK;
        rc = decode(r, o, best.name, best.point, &k, &why);
        if (!rc && tq_store_write_checkpoints(r->ctx, &k, best.point, side))
            rc = cli_lib_error(r->ctx);
        if (!rc || why != TQ_ERR_CORRUPT || t + 1 == RESTORE_TRIES) break;
        cli_log("warning: %s: corrupt; the next-best prefix instead", best.name);
        snprintf(failed[t], sizeof failed[t], "%s", best.name);
        except[t] = failed[t];
        rc = 0;
    }
    free(tokens);
    tq_store_ckpts_free(&k);
    if (rc) {
        if (*side) unlink(r->raw);
        if (*side) unlink(side);
        return rc;
    }
    if (!best.point) return miss(o, &best, n);
    if (llama_server_slot(r->ctx, &r->srv, o->slot, "restore", file, &n_restored))
        rc = cli_lib_error(r->ctx);
    unlink(r->raw);
    unlink(side);
    /* restored already: a store that cannot record the use (read-only) is a warning */
    if (!rc && tq_store_touch(r->ctx, r->store, best.name))
        cli_log("warning: %s: its use not recorded: %s", best.name, tq_ctx_error(r->ctx));
    if (!rc && !o->c.quiet)
        cli_log("slot %ld: %u of the prompt's %u tokens restored from %s in %.2f s", o->slot,
                n_restored, n, best.name, cli_now() - t0);
    /* llama-server uses a restored sliding-window cache only where it reaches back past the
     * window (server-context.cpp: pos_min < pos_next - n_swa), which no cell can before it */
    if (!rc && !o->c.quiet && r->swa_window && best.point <= r->swa_window + 1)
        cli_log("note: slot %ld: a restore of at most the sliding window (%u tokens) is processed "
                "again by a server without --swa-full",
                o->slot, r->swa_window);
    return rc;
}

/* ls: one line (or JSON object) a stored snapshot. */
static int do_ls(slot_run *r, const slot_opts *o)
{
    char **names;
    uint32_t count;
    if (tq_store_list(r->ctx, r->store, "snap", &names, &count)) return cli_lib_error(r->ctx);
    json_t *list = o->c.json ? json_array() : NULL; /* written by the library, never by printf */
    for (uint32_t i = 0; i < count; i++) {
        char entry[300];
        tqkv_reader *s;
        uint64_t size = 0;
        int found = 0;
        char name[TQ_STORE_NAME_MAX + 1];
        size_t len = strlen(names[i]);
        if (len < 6 || strcmp(names[i] + len - 5, ".tqkv")) continue; /* not a snapshot */
        tq_store_entry(TQ_STORE_SNAP_FILE, names[i], entry, sizeof entry);
        snprintf(name, sizeof name, "%.*s", (int)(len - 5), names[i]);
        if (tq_store_size(r->ctx, r->store, entry, &size, &found) || !found ||
            tq_store_snapshot(r->ctx, r->store, name, &s)) {
            cli_log("warning: %s: %s", names[i], found ? tq_ctx_error(r->ctx) : "gone");
            continue;
        }
        const tqkv_meta *m = tqkv_meta_of(s);
        const char *base = m->base_id ? m->base_name : "";
        double used = tq_store_last_used(r->ctx, r->store, name);
        double age = used > 0 ? (double)time(NULL) - used : -1;
        if (list)
            json_array_append_new(list, json_pack("{s:s, s:s%, s:i, s:I, s:f, s:s}", "name", name,
                                                  "model", name, (size_t)16, "tokens",
                                                  (int)m->n_tokens, "bytes", (json_int_t)size,
                                                  "age_s", age, "base", base));
        else
            printf("%-33s %8u tokens %12llu bytes %8.0f s ago%s%s\n", name, m->n_tokens,
                   (unsigned long long)size, age, *base ? "  on " : "", base);
        tqkv_close(s);
    }
    tq_store_names_free(names, count);
    int bad = list && (json_dumpf(list, stdout, JSON_INDENT(1)) || putchar('\n') == EOF);
    json_decref(list);
    return bad || fflush(stdout) ? cli_runtime_error("writing to stdout failed") : 0;
}

/* gc: the least recently used snapshots evicted down to --max-size, chains kept whole. */
static int do_gc(slot_run *r, const slot_opts *o)
{
    tq_store_gc_report rep;
    if (tq_store_gc(r->ctx, r->store, o->max_size, &rep)) return cli_lib_error(r->ctx);
    if (!o->c.quiet)
        cli_log("%s: %u snapshots evicted, %u kept: %.2f MB -> %.2f MB (at most %.2f MB)%s",
                o->store, rep.evicted, rep.kept, rep.bytes_before / 1e6, rep.bytes_after / 1e6,
                o->max_size / 1e6,
                rep.bytes_after > o->max_size ? "; the rest are bases of kept snapshots" : "");
    if (!o->c.quiet && rep.temps_removed)
        cli_log("%s: %u temporary files over an hour old removed", o->store, rep.temps_removed);
    return 0;
}

int cmd_slot(int argc, char **argv)
{
    slot_opts o = {0};
    int rc = parse(argc, argv, &o);
    if (rc) return rc < 0 ? TQ_EXIT_OK : rc;
    slot_run r = {.ctx = cli_ctx_new(o.c.threads), .srv = {o.server, o.timeout}};
    if (!r.ctx) return TQ_EXIT_RUNTIME;
    rc = tq_store_open(r.ctx, o.store, &r.store) ? cli_lib_error(r.ctx) : 0;
    int ls = !strcmp(o.pos[0], "ls");
    int gc = !strcmp(o.pos[0], "gc");
    if (!rc && !ls && !gc) rc = open_model(&r, &o);
    if (!rc && ls) rc = do_ls(&r, &o);
    if (!rc && gc) rc = do_gc(&r, &o);
    if (!rc && !strcmp(o.pos[0], "save")) rc = do_save(&r, &o);
    if (!rc && !strcmp(o.pos[0], "restore")) rc = do_restore(&r, &o);
    free(r.model_path);
    tq_store_close(r.store);
    tq_ctx_free(r.ctx);
    return rc;
}
