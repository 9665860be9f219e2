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
#include "proxy.h"
#include "restore_point.h"
#include "slot_session.h"
#include "store.h"
#include "tqkv.h"

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
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
        "       tq slot proxy   --slot-dir DIR --store STORE [--server URL] [--listen HOST:PORT]\n"
        "                       [--model M.gguf] [--preset P] [--min-tokens N]\n"
        "                       [--max-size SIZE] [--api-key KEY] [--timeout S]\n"
        "       tq slot ls STORE [--json]\n"
        "       tq slot gc STORE --max-size SIZE\n"
        "       tq slot check STORE [--repair]\n"
        "       (each of them: [--key-file KEY]...)\n\n"
        "Keeps llama-server's slots in a snapshot store many servers share (a directory,\n"
        "or s3://bucket/prefix):\n"
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
        "left as it was (it processes the whole prompt).\n"
        "proxy serves clients in front of the server and does both for every request: before\n"
        "a generation, the store's longest restore point beyond what its slot holds is\n"
        "restored; after it, the slot is saved (encoded in the background).  Everything else\n"
        "is forwarded as it came; a store that fails or is slow leaves the request to the\n"
        "server alone.  SIGTERM drains: requests finish, pending saves complete.\n"
        "check reads every entry: each snapshot whole (checksums, or with a key its tags), its\n"
        "name against its tokens and its base, the index, names, use times, restore points and\n"
        "checkpoints against the snapshots, writers' temporaries over an hour old; a line a\n"
        "problem, exit 1 when any is left.  --repair removes what is broken or unreachable\n"
        "(a snapshot not indexed everywhere is indexed again), never another key's entries.\n\n"
        "  --server URL     the server (default http://127.0.0.1:8080)\n"
        "  --slot N         its slot (default 0)\n"
        "  --slot-dir DIR   the server's --slot-save-path\n"
        "  --store STORE    the store: a directory, or s3://bucket/prefix (AWS_* from the\n"
        "                   environment)\n"
        "  --key-file KEY   every entry sealed with KEY (32 raw bytes: head -c 32 /dev/urandom);\n"
        "                   names are keyed hashes and a key's entries a folder of their own\n"
        "                   (TQ_KEY_FILE: the same; a second --key-file opens older entries)\n"
        "  --model M.gguf   the server's model (default: /props' model_path)\n"
        "  --fork-rev REV   save: the TurboQuant+ fork revision of a turbo cache (default: the\n"
        "                   one /props' build_info names, else told from the slot file)\n"
        "  --prompt FILE    restore: the prompt's text, tokenized by the server\n"
        "  --name NAME      save: a name for the snapshot too; restore: the snapshot of that name\n"
        "                   (1 to 128 of A-Z a-z 0-9 . _ -, not beginning with '.': a name,\n"
        "                   never a path)\n"
        "  --timeout S      the most a save, restore or tokenization may take (default 600 s;\n"
        "                   any request is given up after 30 s without a byte); proxy: the\n"
        "                   most a request waits on the store (default 5 s: slower is a miss)\n"
        "  --listen H:P     proxy: where clients connect (default 127.0.0.1:8081; port 0: any)\n"
        "  --api-key KEY    proxy: clients must send Authorization: Bearer KEY\n"
        "  --min-tokens N   proxy: sessions shorter are not kept (default 512)\n"
        "  --preset P       save: balanced (default), small, q8 or lossless\n"
        "  --json           ls: JSON on stdout\n"
        "  --max-size SIZE  gc, proxy: evict the least recently used snapshots until the store\n"
        "                   holds at most SIZE (bytes, or 500M, 20G: powers of 1024); a base goes\n"
        "                   only after every snapshot appended to it\n");
}

typedef struct slot_opts {
    cli_common c;
    const char *pos[2];
    const char *server, *slot_dir, *store, *prompt, *name, *preset;
    const char *listen, *api_key; /* proxy */
    long min_tokens;              /* proxy: -1 the default */
    long slot;
    long timeout;      /* --timeout: seconds a save, restore or tokenization may take */
    uint64_t max_size; /* gc: --max-size in bytes */
    int has_max_size;
    int repair; /* check: --repair */
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

static const char *const actions[] = {"save", "restore", "ls", "gc", "proxy", "check", NULL};
enum { ACTION_SAVE, ACTION_RESTORE, ACTION_LS, ACTION_GC, ACTION_PROXY, ACTION_CHECK };

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
        CLI_OPT_STR("--listen", &o->listen),
        CLI_OPT_STR("--api-key", &o->api_key),
        CLI_OPT_FLAG("--repair", &o->repair),
        CLI_OPT_LONG("--min-tokens", &o->min_tokens, 0, INT32_MAX),
        CLI_OPT_CHOICE("--preset", &o->preset, tq_kvsnap_preset_names,
                       "--preset: '%s' is not balanced, lossless, q8 or small"),
        {NULL},
    };
    const cli_spec spec = {
        "slot", CLI_QUIET | CLI_JSON | CLI_THREADS | CLI_MODEL | CLI_PROFILE | CLI_KEY, own, 2};
    int n = 0;
    int rc = cli_parse(&spec, argc, argv, &o->c, o->pos, &n);
    if (rc) return rc;
    int a = 0;
    while (o->pos[0] && actions[a] && strcmp(actions[a], o->pos[0])) a++;
    if (!o->pos[0] || !actions[a])
        return cli_usage_error("save, restore, proxy, ls, gc or check? (see tq help slot)");
    if (!o->server) o->server = "http://127.0.0.1:8080";
    if (!o->timeout && a != ACTION_PROXY) o->timeout = 600;
    if (o->repair && a != ACTION_CHECK) return cli_usage_error("--repair is check's");
    if (a == ACTION_LS || a == ACTION_GC || a == ACTION_CHECK) {
        if (!o->pos[1]) return cli_usage_error("%s: which store?", o->pos[0]);
        if (a == ACTION_GC && !o->has_max_size) return cli_usage_error("gc: give --max-size SIZE");
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
    if (a == ACTION_RESTORE && !o->prompt == !o->name)
        return cli_usage_error("restore: give --prompt FILE or --name NAME");
    return 0;
}

static void show_progress(void *user, uint64_t done, uint64_t total)
{
    progress_update(user, done, total, "K/V bytes");
}

/* What a subcommand holds open. */
typedef struct slot_run {
    tq_ctx *ctx;
    tq_slot_session ss;
    progress pr;
} slot_run;

static void log_note(void *user, const char *line)
{
    (void)user;
    cli_log("%s", line);
}

/* The session of the options: the server, its folder, the store, the coding. */
static void session_options(slot_run *r, const slot_opts *o)
{
    r->ss.srv = (llama_server){.url = o->server, .timeout_s = o->timeout};
    r->ss.slot_dir = o->slot_dir;
    r->ss.preset = (tq_kvsnap_preset)cli_choice_index(tq_kvsnap_preset_names, o->preset, 0);
    r->ss.threads = (int)o->c.threads;
    r->ss.has_profile = o->c.profile_name != NULL;
    r->ss.profile = o->c.profile;
    r->ss.note = log_note;
    r->ss.on_progress = show_progress;
    r->ss.progress_user = &r->pr;
}

static int do_save(slot_run *r, const slot_opts *o)
{
    tq_slot_saved rep;
    double t0 = cli_now();
    progress_init(&r->pr, o->c.quiet);
    tq_status st = tq_slot_save(r->ctx, &r->ss, o->slot, o->name, &rep);
    progress_end(&r->pr);
    free(rep.tokens);
    if (st) return cli_lib_error(r->ctx);
    if (!o->c.quiet)
        cli_log("slot %ld: %u tokens stored as %s%s%s (%.2f MB%s) in %.2f s", o->slot,
                rep.n_tokens, rep.name, *rep.base ? ", appended to " : "", rep.base,
                rep.bytes / 1e6, rep.checkpoints ? ", with the server's checkpoints" : "",
                cli_now() - t0);
    return 0;
}

/* The prompt's text through the server's tokenizer. */
static int prompt_tokens(slot_run *r, const slot_opts *o, int32_t **tokens, uint32_t *n)
{
    uint8_t *text;
    uint64_t len;
    /* a prompt is text for a tokenizer: 256 MiB is far past any context */
    if (tq_read_regular(r->ctx, o->prompt, 256u << 20, &text, &len))
        return cli_runtime_error("%s: cannot read the prompt: %s", o->prompt,
                                 tq_ctx_error(r->ctx));
    char *z = realloc(text, len + 1);
    if (!z) {
        free(text);
        return cli_runtime_error("out of memory");
    }
    z[len] = 0;
    int rc = 0;
    if (!len || strlen(z) != len) rc = cli_runtime_error("%s: an empty prompt", o->prompt);
    if (!rc && llama_server_tokenize(r->ctx, &r->ss.srv, z, tokens, n)) rc = cli_lib_error(r->ctx);
    free(z);
    return rc;
}

/* What a miss says: why no stored prefix restores. */
static int miss(const slot_opts *o, const tq_slot_restored *rep)
{
    if (o->c.quiet) return TQ_EXIT_MISS;
    if (rep->shared >= TQ_STORE_STRIDE)
        cli_log("slot %ld: miss: stored snapshots share up to %u of the prompt's %u tokens, but "
                "none restores there (a sliding-window cache keeps its last window, a recurrent "
                "state its end; a fork build's checkpoints add restore points); the server "
                "will process the whole prompt",
                o->slot, rep->shared, rep->n_prompt);
    else
        cli_log("slot %ld: miss: no stored snapshot of this model shares the prompt's first %u "
                "tokens; the server will process the whole prompt",
                o->slot, TQ_STORE_STRIDE);
    return TQ_EXIT_MISS;
}

static int do_restore(slot_run *r, const slot_opts *o)
{
    int32_t *tokens = NULL;
    uint32_t n = 0;
    tq_slot_restored rep;
    double t0 = cli_now();
    int rc = 0;
    if (o->name && tq_slot_named_tokens(r->ctx, &r->ss, o->name, &tokens, &n))
        rc = cli_lib_error(r->ctx);
    if (!o->name) rc = prompt_tokens(r, o, &tokens, &n);
    if (rc) return rc;
    progress_init(&r->pr, o->c.quiet);
    tq_status st = tq_slot_restore(r->ctx, &r->ss, o->slot, tokens, n, 0, &rep);
    progress_end(&r->pr);
    free(tokens);
    if (st) return cli_lib_error(r->ctx);
    if (!rep.point) return miss(o, &rep);
    if (!o->c.quiet)
        cli_log("slot %ld: %u of the prompt's %u tokens restored from %s in %.2f s (finding "
                "%.2f s, decoding %.2f s, the server's restore %.2f s)",
                o->slot, rep.point, n, rep.name, cli_now() - t0, rep.find_s, rep.decode_s,
                rep.restore_s);
    if (!o->c.quiet && !tq_restore_window_used(rep.point, r->ss.swa_window))
        cli_log("note: slot %ld: a restore of at most the sliding window (%u tokens) is processed "
                "again by a server without --swa-full",
                o->slot, r->ss.swa_window);
    return 0;
}

/* ls: one line (or JSON object) a stored snapshot. */
static int do_ls(slot_run *r, const slot_opts *o)
{
    char **names;
    uint32_t count;
    if (tq_store_list(r->ctx, r->ss.store, "snap", &names, &count)) return cli_lib_error(r->ctx);
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
        if (tq_store_size(r->ctx, r->ss.store, entry, &size, &found) || !found ||
            tq_store_snapshot(r->ctx, r->ss.store, name, &s)) {
            cli_log("warning: %s: %s", names[i], found ? tq_ctx_error(r->ctx) : "gone");
            continue;
        }
        const tqkv_meta *m = tqkv_meta_of(s);
        const char *base = m->base_id ? m->base_name : "";
        double used = tq_store_last_used(r->ctx, r->ss.store, name);
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
    if (tq_store_gc(r->ctx, r->ss.store, o->max_size, NULL, NULL, &rep))
        return cli_lib_error(r->ctx);
    if (!o->c.quiet)
        cli_log("%s: %u snapshots evicted, %u kept: %.2f MB -> %.2f MB (at most %.2f MB)%s",
                o->store, rep.evicted, rep.kept, rep.bytes_before / 1e6, rep.bytes_after / 1e6,
                o->max_size / 1e6,
                rep.bytes_after > o->max_size ? "; the rest are bases of kept snapshots" : "");
    if (!o->c.quiet && rep.temps_removed)
        cli_log("%s: %u temporary files over an hour old removed", o->store, rep.temps_removed);
    return 0;
}

static void told(void *user, const char *entry, const char *why, int repaired)
{
    const char *store = user;
    cli_log("%s: %s: %s%s", store, entry, why, repaired > 0 ? ": removed" : "");
}

/* check: a line a problem; exit 1 when any is left (--repair: removed, or indexed again). */
static int do_check(slot_run *r, const slot_opts *o)
{
    tq_store_check_report rep;
    if (tq_store_check(r->ctx, r->ss.store, o->repair, told, (void *)tq_store_root(r->ss.store),
                       &rep))
        return cli_lib_error(r->ctx);
    uint32_t left = rep.problems - rep.repaired;
    if (!o->c.quiet || left)
        cli_log("%s: %u snapshots and %u entries read: %u problems, %u repaired", o->store,
                rep.snapshots, rep.entries, rep.problems, rep.repaired);
    return left ? TQ_EXIT_RUNTIME : 0;
}

/* The proxy's log: a line at a time, whole, whichever thread writes it. */
static void log_line(void *user, const char *line)
{
    (void)user;
    flockfile(stderr);
    cli_log("%s", line);
    funlockfile(stderr);
}

/* proxy: serves until SIGTERM or SIGINT, then drains and exits 0. */
static int do_proxy(slot_run *r, const slot_opts *o)
{
    sigset_t stop;
    int sig = 0;
    unsigned port = 0;
    tq_proxy *p;
    tq_proxy_config cfg = {.session = r->ss,
                           .listen = o->listen ? o->listen : "127.0.0.1:8081",
                           .api_key = o->api_key,
                           .min_tokens = o->min_tokens < 0 ? TQ_PROXY_MIN_TOKENS
                                                           : (uint32_t)o->min_tokens,
                           .max_size = o->has_max_size ? o->max_size : 0,
                           .store_timeout_s = o->timeout ? (double)o->timeout
                                                         : TQ_PROXY_STORE_TIMEOUT_S,
                           .drain_s = TQ_PROXY_DRAIN_S,
                           .max_body = TQ_PROXY_MAX_BODY,
                           .client_timeout_s = TQ_PROXY_CLIENT_TIMEOUT_S,
                           .log = log_line};
    cfg.session.srv.timeout_s = 600; /* the server's own work: a slot's save or restore */
    cfg.session.note = log_line;
    cfg.session.on_progress = NULL;
    /* every thread the proxy starts inherits the mask: the signals reach sigwait alone */
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (tq_proxy_start(r->ctx, &cfg, &p, &port)) return cli_lib_error(r->ctx);
    cli_log("proxy: listening on %s (port %u), server %s, store %s", cfg.listen, port,
            o->server, o->store);
    sigwait(&stop, &sig);
    cli_log("proxy: %s: draining", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    tq_proxy_stop(p);
    cli_log("proxy: stopped");
    return 0;
}

int cmd_slot(int argc, char **argv)
{
    slot_opts o = {.min_tokens = -1};
    int rc = parse(argc, argv, &o);
    if (rc) return rc < 0 ? TQ_EXIT_OK : rc;
    slot_run r = {.ctx = cli_ctx_new(o.c.threads)};
    if (!r.ctx) return TQ_EXIT_RUNTIME;
    session_options(&r, &o);
    rc = tq_store_open(r.ctx, o.store, &r.ss.store) ? cli_lib_error(r.ctx) : 0;
    int ls = !strcmp(o.pos[0], "ls");
    int gc = !strcmp(o.pos[0], "gc");
    int check = !strcmp(o.pos[0], "check");
    if (!rc && !ls && !gc && !check && tq_slot_session_model(r.ctx, &r.ss, o.c.model))
        rc = cli_lib_error(r.ctx);
    if (!rc && ls) rc = do_ls(&r, &o);
    if (!rc && gc) rc = do_gc(&r, &o);
    if (!rc && check) rc = do_check(&r, &o);
    if (!rc && !strcmp(o.pos[0], "save")) rc = do_save(&r, &o);
    if (!rc && !strcmp(o.pos[0], "restore")) rc = do_restore(&r, &o);
    if (!rc && !strcmp(o.pos[0], "proxy")) rc = do_proxy(&r, &o);
    tq_slot_session_free(&r.ss);
    tq_store_close(r.ss.store);
    tq_ctx_free(r.ctx);
    return rc;
}
