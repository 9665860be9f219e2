/* cli.h - helpers shared by the subcommands: error reporting with the
 * project's exit codes, option parsing, timing. */
#ifndef TQ_CLI_H
#define TQ_CLI_H

#include "tq.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* TQ_EXIT_MISS: tq slot restore found no stored prefix it can restore (not an error). */
enum { TQ_EXIT_OK = 0, TQ_EXIT_RUNTIME = 1, TQ_EXIT_USAGE = 2, TQ_EXIT_MISS = 3 };

/* Every message is one line on stderr: "tq SUB: message". */
void cli_set_command(const char *name);
/* The message, then exit_code to return: cli_usage_error's TQ_EXIT_USAGE (2), cli_runtime_error's
 * TQ_EXIT_RUNTIME (1). */
int cli_error(int exit_code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define cli_usage_error(...) cli_error(TQ_EXIT_USAGE, __VA_ARGS__)
#define cli_runtime_error(...) cli_error(TQ_EXIT_RUNTIME, __VA_ARGS__)
/* A context for a subcommand with --threads N (0: all cores), OpenMP's
 * own loops included; NULL (the message printed) when out of memory. */
tq_ctx *cli_ctx_new(long threads);
int cli_lib_error(const tq_ctx *ctx); /* returns 1 */
/* A log line (notes, summaries, warnings) with the same prefix. */
void cli_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Parses a decimal integer in [lo, hi] from an option's argument. */
int cli_parse_long(const char *opt, const char *s, long lo, long hi, long *out);

/* A snapshot from a file (mapped, every chunk verified), or from "-" or s3:// (streamed:
 * tqkv_open_src); whole: it will be read whole (an object as one streamed GET), else an
 * object is read by ranges, its index first. */
struct tqkv_reader;
tq_status cli_open_snapshot(tq_ctx *ctx, const char *name, int whole, struct tqkv_reader **out);
/* What a snapshot sealed with a key this run does not hold shows (head: its first 16 bytes):
 * that it is sealed and by which key id, as text or a JSON object; 0 or an exit code. */
int cli_show_sealed(const char *name, const unsigned char *head, int json);
/* s[0..len) quoted, control bytes as \xNN, at most max of them then "..." (text reports). */
void cli_print_visible(FILE *f, const char *s, uint64_t len, uint64_t max);
/* The fork revisions tq knows (all, or those with turbo caches), as a help lists them: after
 * lead, wrapped at 88 columns with indent before each further line. */
void cli_help_revisions(const char *lead, const char *indent, int turbo_only);
/* A llama.cpp state or NumPy dump (tq_kv_view_open): "-" and s3:// copied to a temporary
 * file first (the plan reads the whole state), named as given in messages. */
struct tq_kv_view;
tq_status cli_open_view(tq_ctx *ctx, const char *name, int profile, struct tq_kv_view **out);

/* A size for people: "512 B", "1.50 MiB" (steps of 1024); a count: "950", "1.2M" (of 1000). */
void cli_human_size(double bytes, char *out, size_t n);
void cli_human_count(double v, char *out, size_t n);
double cli_now(void); /* monotonic seconds */
int cli_is_tty(int fd);

typedef struct cli_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv); /* NULL: not implemented yet */
    void (*help)(void);
} cli_command;

int cmd_bench(int argc, char **argv);
int cmd_slot(int argc, char **argv);
void help_slot(void);
void help_bench(void);
int cmd_inspect(int argc, char **argv);
void help_inspect(void);
int cmd_encode_kvdump(int argc, char **argv);
void help_encode_kvdump(void);
int cmd_decode_kvdump(int argc, char **argv);
int cmd_quantize_tq4(int argc, char **argv);
int cmd_rotate_weights(int argc, char **argv);
int cmd_calibrate_innerq(int argc, char **argv);
void help_calibrate_innerq(void);
/* a SCALES.gguf of calibrate-innerq described for `tq inspect` (calibrate_innerq.c) */
void print_innerq_scales(const char *path);
void help_rotate_weights(void);
void help_quantize_tq4(void);
void help_decode_kvdump(void);

#endif
