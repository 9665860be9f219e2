/* inspect.h - the non-GGUF inputs of `tq inspect` (inspect_kv.c). */
#ifndef TQ_INSPECT_H
#define TQ_INSPECT_H

#include "gguf.h"

/* path: the file to read; label: its name in the report (a pipe's or an object's copy). */
int inspect_state(const char *path, const char *label, int json, tq_type_profile profile);
/* src: a pipe or an object (io.h, taken), else the file at path. */
struct tq_src;
int inspect_snapshot(const char *path, struct tq_src *src, int json);

#endif
