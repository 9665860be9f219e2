/* inspect.h - the non-GGUF inputs of `tq inspect` (inspect_kv.c). */
#ifndef TQ_INSPECT_H
#define TQ_INSPECT_H

#include "gguf.h"

int inspect_state(const char *path, int json, tq_type_profile profile);
int inspect_snapshot(const char *path, int json);

#endif
