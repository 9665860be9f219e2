/* bench_workload.h - the data `tq bench` runs on (cmd/bench_workload.c). */
#ifndef TQ_BENCH_WORKLOAD_H
#define TQ_BENCH_WORKLOAD_H

#include "bench.h"
#include "gguf.h"
#include "model.h"

int bw_builtin(bworkload *w, int quick);
/* A state file, NumPy dump or .tqkv snapshot (through the KV front door),
 * the model (or NULL) giving the head size. */
int bw_from_file(tq_ctx *ctx, bworkload *w, const char *path, const tq_model *model, int quick,
                 char *err, size_t el);
void bw_free(bworkload *w);

#endif
