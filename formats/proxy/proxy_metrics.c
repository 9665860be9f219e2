/* proxy_metrics.c - /tq/metrics: the proxy's counters in Prometheus' text format
 * (PROXY.md lists them). */
#define _GNU_SOURCE /* open_memstream */
#include "proxy_impl.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct metric_row {
    const char *name;
    const char *type;
    double value;
    const char *help;
} metric_row;

char *proxy_metrics_text(tq_proxy *p)
{
    char *text = NULL;
    size_t len = 0;
    pthread_mutex_lock(&p->lock);
    proxy_metrics m = p->m;
    double pending = p->pending;
    pthread_mutex_unlock(&p->lock);
    /* clang-format off */
    const metric_row rows[] = {
        /* name (tq_proxy_...)                type       value                  help */
        {"requests_total",                    "counter", m.requests,            "requests"},
        {"generations_total",                 "counter", m.generations,         "generations"},
        {"hits_total",                        "counter", m.hits,                "restored"},
        {"misses_total",                      "counter", m.misses,              "nothing held"},
        {"tokens_restored_total",             "counter", m.tokens_restored,     "restored"},
        {"prompt_tokens_total",               "counter", m.prompt_tokens,       "in prompts"},
        {"prompt_tokens_processed_total",     "counter", m.prompt_tokens_processed,
                                                                                "processed"},
        {"bytes_stored_total",                "counter", m.bytes_stored,        "written"},
        {"saves_total",                       "counter", m.saves,               "stored"},
        {"saves_skipped_total",               "counter", m.saves_skipped,       "skipped"},
        {"errors_total",                      "counter", m.errors,              "failed"},
        {"restore_seconds_total",             "counter", m.restore_s,           "restoring"},
        {"save_seconds_total",                "counter", m.save_s,              "saving"},
        {"saves_pending",                     "gauge",   pending,               "waiting"},
    };
    /* clang-format on */
    FILE *f = open_memstream(&text, &len);
    if (!f) return NULL;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        fprintf(f, "# HELP tq_proxy_%s %s (PROXY.md)\n# TYPE tq_proxy_%s %s\ntq_proxy_%s %.17g\n",
                rows[i].name, rows[i].help, rows[i].name, rows[i].type, rows[i].name,
                rows[i].value);
    if (fclose(f)) {
        free(text);
        return NULL;
    }
    return text;
}
