/* cli_opts.h - one option parser for every subcommand: the common options
 * (-o, -q/--quiet, --json, --threads, --type-profile, --model, --device, --key-file) and a
 * table of
 * the subcommand's own.  A missing or malformed value is one line on stderr
 * and exit 2, before anything is opened or written. */
#ifndef TQ_CLI_OPTS_H
#define TQ_CLI_OPTS_H

#include "gguf.h"

typedef enum cli_kind {
    CLI_FLAG,   /* no value: *(int *)dst = 1 */
    CLI_STR,    /* a non-empty value: *(const char **)dst */
    CLI_LONG,   /* an integer in [lo, hi]: *(long *)dst */
    CLI_CHOICE, /* one of choices: *(const char **)dst; `bad` formats the refusal of '%s' */
    CLI_FN      /* fn(user, value) checks and stores it; prints its own usage error */
} cli_kind;

typedef struct cli_opt {
    const char *name, *alias;
    cli_kind kind;
    void *dst;
    long lo, hi;
    const char *const *choices; /* NULL-terminated */
    const char *bad;            /* CLI_CHOICE: "--preset: unknown preset '%s' (...)" */
    int (*fn)(void *user, const char *value); /* CLI_FN: 0 or an exit code */
    void *user;
    int optional; /* CLI_CHOICE: "--name" alone means choices[0]; a value only as "--name=V" */
} cli_opt;

#define CLI_OPT_FLAG(n, d)                                                                         \
    {                                                                                              \
        .name = (n), .kind = CLI_FLAG, .dst = (d)                                                  \
    }
#define CLI_OPT_STR(n, d)                                                                          \
    {                                                                                              \
        .name = (n), .kind = CLI_STR, .dst = (d)                                                   \
    }
#define CLI_OPT_LONG(n, d, l, h)                                                                   \
    {                                                                                              \
        .name = (n), .kind = CLI_LONG, .dst = (d), .lo = (l), .hi = (h)                            \
    }
#define CLI_OPT_CHOICE(n, d, c, b)                                                                 \
    {                                                                                              \
        .name = (n), .kind = CLI_CHOICE, .dst = (d), .choices = (c), .bad = (b)                    \
    }
#define CLI_OPT_FN(n, f, u)                                                                        \
    {                                                                                              \
        .name = (n), .kind = CLI_FN, .fn = (f), .user = (u)                                        \
    }

enum {
    CLI_O = 1,
    CLI_QUIET = 2,
    CLI_JSON = 4,
    CLI_THREADS = 8,
    CLI_PROFILE = 16,
    CLI_MODEL = 32,
    CLI_DEVICE = 64,
    CLI_KEY = 128 /* --key-file (repeatable), else $TQ_KEY_FILE: the process's keys (seal.h) */
};

typedef struct cli_common {
    const char *out; /* -o / --output */
    int quiet, json;
    long threads;             /* 0: all cores */
    const char *profile_name; /* --type-profile as given (NULL: the default) */
    tq_type_profile profile;
    const char *model;
    const char *device; /* --device auto|cpu|cuda (NULL: auto); see cli_device() */
    int n_keys;         /* --key-file given this many times */
} cli_common;

typedef struct cli_spec {
    const char *sub;     /* for "see tq help SUB" */
    unsigned common;     /* CLI_* the subcommand takes */
    const cli_opt *opts; /* its own, ended by an entry without a name */
    int max_pos;         /* positional arguments it takes */
} cli_spec;

/* 0, or TQ_EXIT_USAGE after one line on stderr.  `--list-options` prints the
 * table (name, kind, range or choices; for tests and shell completion) and
 * returns -1: the caller exits 0. */
int cli_parse(const cli_spec *s, int argc, char **argv, cli_common *c, const char **pos,
              int *n_pos);

/* A choice's index in its NULL-terminated list (the parser allows only these), else dflt. */
int cli_choice_index(const char *const *choices, const char *v, int dflt);

/* How a KV state's type ids are read: the revision --fork-rev (or --type-profile) names, else
 * TQ_PROFILE_AUTO (the state reader tells the fork's revisions apart). */
int cli_kv_profile(const cli_common *c);
/* The GGUF reader's options for the --type-profile given (or the default). */
tq_gguf_options cli_gguf_options(const cli_common *c);

#endif
