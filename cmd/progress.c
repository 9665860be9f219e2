/* progress.c - see progress.h. */
#include "progress.h"

#include "cli.h"

#include <stdio.h>
#include <unistd.h>

void progress_init(progress *p, int quiet)
{
    p->enabled = !quiet && cli_is_tty(STDERR_FILENO);
    p->last = 0;
    p->drawn = 0;
}

void progress_update(progress *p, uint64_t done, uint64_t total, const char *what)
{
    if (!p->enabled) return;
    double now = cli_now();
    if (p->drawn && now - p->last < 1.0 / 6 && done < total) return;
    p->last = now;
    p->drawn = 1;
    fprintf(stderr, "\r\033[K[%3.0f%%] %llu/%llu %s", total ? 100.0 * done / total : 100.0,
            (unsigned long long)done, (unsigned long long)total, what ? what : "");
    fflush(stderr);
}

void progress_end(progress *p)
{
    if (p->enabled && p->drawn) fputs("\r\033[K", stderr);
    p->drawn = 0;
}
