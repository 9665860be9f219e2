/* fuzz_store_names.c - libFuzzer target for what a store holds as text (formats/store/store.h):
 * a name is one the rule takes or refuses, and one it takes is never a path; a points entry
 * parses or is refused, and what parses restores only within the snapshot and the shared
 * prefix. */
#include "store.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    if (tq_store_name_ok(text) &&
        (strchr(text, '/') || text[0] == '.' || strlen(text) > TQ_STORE_NAME_MAX))
        abort();
    if (tq_store_is_snapshot_name(text) && !tq_store_name_ok(text)) abort();
    const uint32_t n_tokens = 1000;
    tq_restore_points pt;
    tq_restore_points_whole(&pt, n_tokens);
    if (tq_store_parse_points(text, n_tokens, &pt)) {
        if (pt.from < 1 || pt.from > n_tokens || pt.n_checkpoints > TQ_RESTORE_MAX_CHECKPOINTS)
            abort();
        for (uint32_t i = 0; i < pt.n_checkpoints; i++)
            if (pt.checkpoint[i] > n_tokens || (i && pt.checkpoint[i] <= pt.checkpoint[i - 1]))
                abort();
        static const uint32_t commons[] = {0, 1, 255, 256, 999, 1000, 1001, 5000};
        for (size_t i = 0; i < sizeof commons / sizeof *commons; i++) {
            uint32_t at = tq_restore_point_for(&pt, n_tokens, commons[i], commons[i] + 1);
            if (at > commons[i] || at > n_tokens) abort();
        }
    }
    free(text);
    return 0;
}
