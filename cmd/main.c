/* main.c - the tq command: dispatch to subcommands, global help and version. */
#include "cli.h"
#include "file_io.h"

#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static const cli_command commands[] = {
    {"rotate-weights", "fold exact orthogonal rotations into a GGUF model", cmd_rotate_weights,
     help_rotate_weights},
    {"quantize-tq4", "write TQ4_1S / TQ3_1S GGUF models", cmd_quantize_tq4, help_quantize_tq4},
    {"calibrate-innerq",
     "per-channel K/V equalization scales from KV dumps, kept or folded into the model",
     cmd_calibrate_innerq, help_calibrate_innerq},
    {"encode-kvdump", "compress llama.cpp session/slot files into .tqkv snapshots",
     cmd_encode_kvdump, help_encode_kvdump},
    {"decode-kvdump", "restore .tqkv snapshots to llama.cpp state files", cmd_decode_kvdump,
     help_decode_kvdump},
    {"inspect", "describe GGUF models, llama.cpp state files and .tqkv snapshots", cmd_inspect,
     help_inspect},
    {"slot", "llama-server's slots saved to a snapshot store and the longest prefix restored",
     cmd_slot, help_slot},
    {"bench", "every codec measured: reconstruction, attention, speed", cmd_bench, help_bench},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: tq [--help | --version] SUBCOMMAND [options]\n"
               "       tq help SUBCOMMAND\n\n"
               "TurboQuant toolchain: model conversion and KV-cache snapshots for llama.cpp.\n\n"
               "subcommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-17s %s%s\n", commands[i].name, commands[i].summary,
                commands[i].run ? "" : " (not implemented yet)");
    fprintf(f, "\nData goes to stdout, logs and progress to stderr. Exit status: 0 ok,\n"
               "1 runtime error, 2 usage error. See tq(1) and tq-SUBCOMMAND(1).\n");
}

static const cli_command *find(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0) return &commands[i];
    return NULL;
}

/* Ctrl-C, a kill: tq's temporary files go (file_io.h), then the signal does what it would. */
static void on_signal(int sig)
{
    tq_temp_remove_all();
    signal(sig, SIG_DFL);
    raise(sig);
}

int main(int argc, char **argv)
{
    /* The pipelines allocate and free chunk buffers of 0.1-1 MB thousands of
     * times; served by mmap, each costs page faults and zeroing (15% of a
     * snapshot decode).  Keep them in the heap for reuse. */
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    if (argc < 2) {
        usage(stderr);
        return TQ_EXIT_USAGE;
    }
    const char *a = argv[1];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
        usage(stdout);
        return TQ_EXIT_OK;
    }
    if (!strcmp(a, "--version") || !strcmp(a, "-V")) {
        printf("tq %s (libtq %s; simd %s; cuda %s)\n", TQ_VERSION_STRING, tq_version(),
               tq_simd_name(tq_simd_best()), tq_cuda_built() ? "built" : "not built");
        return TQ_EXIT_OK;
    }
    if (!strcmp(a, "help")) {
        if (argc < 3) {
            usage(stdout);
            return TQ_EXIT_OK;
        }
        const cli_command *c = find(argv[2]);
        cli_set_command("tq help");
        if (!c) return cli_usage_error("unknown subcommand '%s' (see tq --help)", argv[2]);
        if (!c->run) {
            printf("tq %s: %s (not implemented yet)\n", c->name, c->summary);
            return TQ_EXIT_OK;
        }
        c->help();
        return TQ_EXIT_OK;
    }
    const cli_command *c = find(a);
    if (!c) return cli_usage_error("unknown subcommand '%s' (see tq --help)", a);
    static char label[64];
    snprintf(label, sizeof label, "tq %s", c->name);
    cli_set_command(label);
    if (!c->run) return cli_usage_error("not implemented yet");
    /* `tq SUBCOMMAND --help` prints the usage to stdout, as git and zstd do */
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            c->help();
            return TQ_EXIT_OK;
        }
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    return c->run(argc - 1, argv + 1);
}
