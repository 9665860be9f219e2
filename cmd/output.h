/* output.h - an output file that appears only when complete: written to a
 * temporary file beside the destination, renamed into place on commit (or
 * exchanged with the file there, which is then removed),
 * removed on abort.  A path that is not a regular file (a device, a FIFO, a link to one) is
 * written into as a stream, never replaced; a link to a regular file is replaced where it
 * points.  "-" writes to stdout; s3://bucket/key uploads an object
 * that appears on commit (formats/io/io.h).  An output that is one of the
 * inputs (same device and inode, or the same object) is refused. */
#ifndef TQ_OUTPUT_H
#define TQ_OUTPUT_H

#include <stddef.h>
#include <stdio.h>

struct tq_sink;
struct tq_sealer;

typedef struct cli_out {
    FILE *f;
    struct tq_sink *sink; /* an object being uploaded */
    char *path, *tmp;
    int is_stdout;
    int is_stream; /* a device or FIFO written into, not replaced */
    int durable; /* fsynced before it is put in place */
    struct tq_sealer *sealer; /* cli_out_seal: f is its plaintext stream, dst the output's */
    FILE *dst;
} cli_out;

int cli_out_open(cli_out *o, const char *path, const char *const *inputs,
                 size_t n_inputs); /* 0 or exit code */
int cli_out_commit(cli_out *o);    /* 0 or exit code */
void cli_out_abort(cli_out *o);
/* Why a write to an object failed (the store's answer), NULL when none did: the message to
 * give instead of the writer's "writing failed". */
const char *cli_out_error(const cli_out *o);
/* What is written from now on sealed with the process's key (seal.h; none: as it is). */
int cli_out_seal(cli_out *o); /* 0 or exit code */
/* durable 0: no fsync before the rename (outputs derived from an input that stays). */
int cli_out_open_ex(cli_out *o, const char *path, const char *const *inputs, size_t n_inputs,
                    int durable);

#endif
