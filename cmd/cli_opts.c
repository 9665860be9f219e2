/* cli_opts.c - the option parser (cli_opts.h). */
#include "cli.h"
#include "cli_opts.h"
#include "seal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const devices[] = {"auto", "cpu", "cuda", NULL};

static const cli_opt common_opts[] = {
    {.name = "--output", .alias = "-o", .kind = CLI_STR},
    {.name = "--quiet", .alias = "-q", .kind = CLI_FLAG},
    CLI_OPT_FLAG("--json", NULL),
    CLI_OPT_LONG("--threads", NULL, 0, 4096),
    {.name = "--type-profile", .alias = "--fork-rev", .kind = CLI_FN},
    CLI_OPT_STR("--model", NULL),
    CLI_OPT_CHOICE("--device", NULL, devices, "--device: '%s' is not auto, cpu or cuda"),
    {.name = "--key-file", .kind = CLI_FN},
};

/* The keys of this run: the first given seals, every one opens (a key being rotated). */
static tq_seal_keys run_keys;

static int add_key(void *user, const char *path)
{
    cli_common *c = user;
    tq_ctx *ctx = tq_ctx_new();
    int exposed = 0;
    int rc = !ctx ? cli_runtime_error("out of memory") : 0;
    if (ctx && tq_seal_keys_load(ctx, path, &run_keys, &exposed)) /* before anything is read */
        rc = cli_usage_error("--key-file: %s", tq_ctx_error(ctx));
    tq_ctx_free(ctx);
    if (rc) return rc;
    if (exposed)
        cli_log("warning: %s can be read by others than its owner (chmod 600 %s)", path, path);
    tq_seal_keys_use(&run_keys);
    c->n_keys++;
    return 0;
}

static int set_profile(void *user, const char *v)
{
    cli_common *c = user;
    char known[1024];
    tq_type_profile_list(known, sizeof known, 0);
    if (tq_type_profile_parse(v, &c->profile))
        return cli_usage_error("--type-profile/--fork-rev: unknown revision '%s' (%s)", v, known);
    c->profile_name = v;
    return 0;
}

/* The common options this subcommand takes, pointing into c. */
static int common_table(unsigned mask, cli_common *c, cli_opt *out)
{
    void *dst[] = {&c->out, &c->quiet, &c->json, &c->threads, NULL, &c->model, &c->device, NULL};
    int (*fns[])(void *, const char *) = {NULL, NULL, NULL, NULL, set_profile, NULL, NULL, add_key};
    int n = 0;
    for (int i = 0; i < 8; i++) {
        if (!(mask & (1u << i))) continue;
        out[n] = common_opts[i];
        out[n].dst = dst[i];
        if (out[n].kind == CLI_FN) {
            out[n].fn = fns[i];
            out[n].user = c;
        }
        n++;
    }
    return n;
}

/* "--name VALUE", "--name=VALUE" or the alias: 1 and *v set (NULL when the
 * value is missing), 0 if arg is not this option. */
static int match(const cli_opt *o, int argc, char **argv, int *i, const char **v)
{
    const char *a = argv[*i];
    const char *names[2] = {o->name, o->alias};
    for (int k = 0; k < 2; k++) {
        size_t n = names[k] ? strlen(names[k]) : 0;
        if (!n || strncmp(a, names[k], n)) continue;
        if (a[n] == '=' && o->kind != CLI_FLAG) {
            *v = a + n + 1;
            return 1;
        }
        if (a[n]) continue;
        if (o->kind == CLI_FLAG) {
            *v = "";
            return 1;
        }
        if (o->kind == CLI_CHOICE && o->optional) {
            *v = o->choices[0];
            return 1;
        }
        *v = *i + 1 < argc ? argv[++*i] : NULL;
        return 1;
    }
    return 0;
}

static int store(const cli_opt *o, const char *v)
{
    if (o->kind == CLI_FLAG) {
        *(int *)o->dst = 1;
        return 0;
    }
    if (!*v) return cli_usage_error("%s: empty value", o->name);
    switch (o->kind) {
        case CLI_STR:
            *(const char **)o->dst = v;
            return 0;
        case CLI_LONG:
            return cli_parse_long(o->name, v, o->lo, o->hi, (long *)o->dst) ? TQ_EXIT_USAGE : 0;
        case CLI_CHOICE:
            for (int k = 0; o->choices[k]; k++)
                if (!strcmp(v, o->choices[k])) {
                    *(const char **)o->dst = o->choices[k];
                    return 0;
                }
            return cli_usage_error(o->bad, v);
        case CLI_FN:
            return o->fn(o->user, v);
        default:
            return 0;
    }
}

static void list(const cli_opt *t, int n)
{
    static const char *const kinds[] = {"flag", "string", "integer", "choice", "value"};
    for (int i = 0; i < n; i++) {
        printf("%s %s", t[i].name, kinds[t[i].kind]);
        if (t[i].kind == CLI_LONG) printf(" %ld %ld", t[i].lo, t[i].hi);
        for (int k = 0; t[i].kind == CLI_CHOICE && t[i].choices[k]; k++)
            printf(" %s", t[i].choices[k]);
        if (t[i].optional) printf(" optional");
        putchar('\n');
    }
}

int cli_parse(const cli_spec *s, int argc, char **argv, cli_common *c, const char **pos, int *n_pos)
{
    cli_opt table[64];
    memset(c, 0, sizeof *c);
    c->profile = TQ_PROFILE_DEFAULT;
    int n = common_table(s->common, c, table);
    for (const cli_opt *o = s->opts; o && o->name && n < 64; o++) table[n++] = *o;
    *n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (!strcmp(a, "--list-options")) {
            list(table, n);
            return -1;
        }
        int k = 0, rc;
        while (k < n && !match(&table[k], argc, argv, &i, &v)) k++;
        if (k < n) {
            if (!v) return cli_usage_error("%s needs a value", table[k].name);
            if ((rc = store(&table[k], v))) return rc;
        } else if (a[0] == '-' && a[1]) {
            return cli_usage_error("unknown option '%s' (see tq help %s)", a, s->sub);
        } else if (*n_pos == s->max_pos) {
            return cli_usage_error("too many arguments ('%s')", a);
        } else {
            pos[(*n_pos)++] = a;
        }
    }
    const char *env_key = getenv("TQ_KEY_FILE");
    if ((s->common & CLI_KEY) && !c->n_keys && env_key && *env_key) return add_key(c, env_key);
    return 0;
}

tq_gguf_options cli_gguf_options(const cli_common *c)
{
    return (tq_gguf_options){c->profile, c->profile_name != NULL};
}

int cli_kv_profile(const cli_common *c)
{
    return c->profile_name ? (int)c->profile : (int)TQ_PROFILE_AUTO;
}

int cli_choice_index(const char *const *choices, const char *v, int dflt)
{
    for (int i = 0; v && choices[i]; i++)
        if (!strcmp(choices[i], v)) return i;
    return dflt;
}
