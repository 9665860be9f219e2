/* progress.h - a one-line progress display on stderr, shown only when stderr
 * is a terminal and redrawn at most six times a second (zstd's convention). */
#ifndef TQ_PROGRESS_H
#define TQ_PROGRESS_H

#include <stdint.h>

typedef struct progress {
    int enabled;
    double last;
    int drawn;
} progress;

void progress_init(progress *p, int quiet);
void progress_update(progress *p, uint64_t done, uint64_t total, const char *what);
void progress_end(progress *p);

#endif
