/* model_rope.c - see model_rope.h. */
#include "model_rope.h"
#include "arch.h"

#include <stdio.h>
#include <string.h>

static int get_float(const tq_gguf *g, const char *arch, const char *key, double *out)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    int64_t i = tq_gguf_find_key(g, k);
    return i >= 0 && tq_gguf_kv_get_float(g, i, 0, out) == 0;
}

int tq_model_rope(const tq_gguf *g, uint32_t head_dim, int swa, tq_rope *out)
{
    uint64_t alen = 0;
    const char *a = tq_gguf_get_str(g, "general.architecture", NULL, &alen);
    char arch[64], k[128];
    if (!a || !alen || alen >= sizeof arch) return 0;
    memcpy(arch, a, alen);
    arch[alen] = 0;
    snprintf(k, sizeof k, "%s.rope.dimension_count", arch);
    int64_t n_rot = tq_gguf_get_int(g, k, head_dim);
    double base = 10000, factor = 1, v;
    get_float(g, arch, "rope.freq_base", &base);
    snprintf(k, sizeof k, "%s.rope.scaling.type", arch);
    uint64_t tl = 0;
    const char *type = tq_gguf_get_str(g, k, "none", &tl);
    if (tl == 6 && !memcmp(type, "linear", 6))
        get_float(g, arch, "rope.scaling.factor", &factor);
    else if (!(tl == 4 && !memcmp(type, "none", 4)))
        return 0;
    else if (get_float(g, arch, "rope.scale_linear", &v))
        factor = v;
    if (swa && get_float(g, arch, "rope.freq_base_swa", &v)) {
        base = v;
        factor = 1;
    } else if (swa && tq_arch_find(arch) && tq_arch_find(arch)->swa_rope_base > 0) {
        base = tq_arch_find(arch)->swa_rope_base; /* llama.cpp's fixed base for these */
        factor = 1;
    }
    if (n_rot <= 0 || (uint64_t)n_rot > head_dim || n_rot % 2 || !(factor > 0) || !(base > 0))
        return 0;
    *out = (tq_rope){head_dim, (uint32_t)n_rot, tq_arch_rope_pairs(arch), (float)base,
                     (float)(1.0 / factor)};
    return 1;
}
