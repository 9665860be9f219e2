/* cli.c - shared CLI helpers. */
#include "cli.h"

#include "file_io.h"

#include "io.h"
#include "kv_view.h"
#include "s3.h"
#include "seal.h"
#include "json.h"
#include "tqkv.h"

#include <errno.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *command = "tq";

/* An object store's retries, told as they happen. */
static void s3_note(void *user, const char *msg)
{
    (void)user;
    cli_log("%s", msg);
}

void cli_set_command(const char *name)
{
    command = name;
    tq_s3_set_note(s3_note, NULL);
}

tq_status cli_open_snapshot(tq_ctx *ctx, const char *name, int whole, tqkv_reader **out)
{
    tq_src *src;
    if (!tq_io_is_stream(name)) return tqkv_open(ctx, name, out);
    tq_status st = tq_src_open(ctx, name, &src);
    if (!st && whole) tq_src_sequential(src);
    return st ? st : tqkv_open_src(ctx, src, out);
}

int cli_show_sealed(const char *name, const unsigned char *head, int json)
{
    char id[17];
    tq_seal_key_id_hex(head + 8, id);
    if (json) {
        json_t *doc = json_pack("{s:o, s:s, s:b, s:s}", "file", json_text(name), "format", "tqkv",
                                "sealed", 1, "key_id", id);
        json_layout layout = {NULL, NULL, 0};
        if (json_write_report(stdout, doc, &layout))
            return cli_runtime_error("stdout: write failed");
    } else {
        printf("file:          %s (a sealed .tqkv snapshot: AES-256-GCM)\n", name);
        printf("key id:        %s (its contents need that key: --key-file or TQ_KEY_FILE)\n",
               id);
    }
    return fflush(stdout) ? cli_runtime_error("writing to stdout failed") : 0;
}

void cli_print_visible(FILE *f, const char *s, uint64_t len, uint64_t max)
{
    uint64_t show = len > max ? max : len;
    fputc('\'', f);
    for (uint64_t k = 0; k < show; k++) {
        unsigned char c = (unsigned char)s[k];
        if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\x%02x", c);
        else
            fputc(c, f);
    }
    fputs(show < len ? "'..." : "'", f);
}

void cli_help_revisions(const char *lead, const char *indent, int turbo_only)
{
    char list[1024];
    tq_type_profile_list(list, sizeof list, turbo_only);
    size_t col = strlen(lead);
    fputs(lead, stdout);
    for (char *word = strtok(list, " "); word; word = strtok(NULL, " ")) {
        if (col + 1 + strlen(word) > 88) {
            printf("\n%s%s", indent, word);
            col = strlen(indent) + strlen(word);
        } else {
            printf(" %s", word);
            col += 1 + strlen(word);
        }
    }
    fputc('\n', stdout);
}

static int state_magic(const uint8_t *head, size_t n) { return tq_kv_view_probe(head, n) != 0; }

tq_status cli_open_view(tq_ctx *ctx, const char *name, int profile, struct tq_kv_view **out)
{
    char *tmp;
    const char *path;
    tq_status st = tq_io_local(ctx, name, state_magic, &tmp, &path);
    if (!st) st = tq_kv_view_open_as(ctx, path, name, (tq_type_profile)profile, out);
    tq_temp_discard(tmp);
    return st;
}

/* A message is one line whatever the names in it hold: control characters shown as \xNN. */
static void vmsg(const char *fmt, va_list ap)
{
    char line[4096];
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    char *text = n >= (int)sizeof line ? malloc((size_t)n + 1) : line;
    if (text != line && text) vsnprintf(text, (size_t)n + 1, fmt, again);
    va_end(again);
    fprintf(stderr, "%s: ", command);
    const char *shown = text ? text : line; /* no memory: the message cut at 4 KiB */
    for (const unsigned char *c = (const unsigned char *)shown; *c; c++) {
        if (*c < 0x20 || *c == 0x7f)
            fprintf(stderr, "\\x%02x", *c);
        else
            fputc(*c, stderr);
    }
    fputc('\n', stderr);
    if (text != line) free(text);
}

int cli_error(int exit_code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg(fmt, ap);
    va_end(ap);
    return exit_code;
}

int cli_lib_error(const tq_ctx *ctx) { return cli_runtime_error("%s", tq_ctx_error(ctx)); }

void cli_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg(fmt, ap);
    va_end(ap);
}

int cli_parse_long(const char *opt, const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        cli_usage_error("%s: '%s' is not an integer in [%ld, %ld]", opt, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int cli_is_tty(int fd) { return isatty(fd); }

tq_ctx *cli_ctx_new(long threads)
{
    tq_ctx *ctx = tq_ctx_new();
    if (!ctx) {
        cli_runtime_error("out of memory");
        return NULL;
    }
    tq_ctx_set_threads(ctx, (int)threads);
    if (threads > 0) omp_set_num_threads((int)threads);
    return ctx;
}

/* v in steps of `step` with the units' names (5 of them), fmt for a scaled
 * value: "%.2f %s" (sizes) or "%.1f%s" (counts); whole units as "%.0f". */
static void human(double v, double step, const char *const *u, const char *fmt, const char *whole,
                  char *out, size_t n)
{
    int i = 0;
    while (v >= step && i < 4) {
        v /= step;
        i++;
    }
    snprintf(out, n, i ? fmt : whole, v, u[i]);
}

void cli_human_size(double bytes, char *out, size_t n)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    human(bytes, 1024, u, "%.2f %s", "%.0f %s", out, n);
}

void cli_human_count(double v, char *out, size_t n)
{
    static const char *const u[] = {"", "K", "M", "B", "T"};
    human(v, 1000, u, "%.1f%s", "%.0f%s", out, n);
}
