/* gguf_ftypes.c - llama.cpp's general.file_type values (include/llama.h, enum llama_ftype),
 * and the fork's two (LLAMA_FTYPE_MOSTLY_TQ3_1S 43, TQ4_1S 44). */
#include "gguf.h"

#include <stddef.h>

/* clang-format off */
static const struct {
    int id;
    const char *name;
} file_types[] = {
    /* id  name */
    {0,    "ALL_F32"},
    {1,    "MOSTLY_F16"},
    {2,    "MOSTLY_Q4_0"},
    {3,    "MOSTLY_Q4_1"},
    {7,    "MOSTLY_Q8_0"},
    {8,    "MOSTLY_Q5_0"},
    {9,    "MOSTLY_Q5_1"},
    {10,   "MOSTLY_Q2_K"},
    {11,   "MOSTLY_Q3_K_S"},
    {12,   "MOSTLY_Q3_K_M"},
    {13,   "MOSTLY_Q3_K_L"},
    {14,   "MOSTLY_Q4_K_S"},
    {15,   "MOSTLY_Q4_K_M"},
    {16,   "MOSTLY_Q5_K_S"},
    {17,   "MOSTLY_Q5_K_M"},
    {18,   "MOSTLY_Q6_K"},
    {19,   "MOSTLY_IQ2_XXS"},
    {20,   "MOSTLY_IQ2_XS"},
    {21,   "MOSTLY_Q2_K_S"},
    {22,   "MOSTLY_IQ3_XS"},
    {23,   "MOSTLY_IQ3_XXS"},
    {24,   "MOSTLY_IQ1_S"},
    {25,   "MOSTLY_IQ4_NL"},
    {26,   "MOSTLY_IQ3_S"},
    {27,   "MOSTLY_IQ3_M"},
    {28,   "MOSTLY_IQ2_S"},
    {29,   "MOSTLY_IQ2_M"},
    {30,   "MOSTLY_IQ4_XS"},
    {31,   "MOSTLY_IQ1_M"},
    {32,   "MOSTLY_BF16"},
    {36,   "MOSTLY_TQ1_0"},
    {37,   "MOSTLY_TQ2_0"},
    {38,   "MOSTLY_MXFP4_MOE"},
    {39,   "MOSTLY_NVFP4"},
    {40,   "MOSTLY_Q1_0"},
    {41,   "MOSTLY_Q2_0"},
    {TQ_FTYPE_TQ3_1S, "MOSTLY_TQ3_1S (fork)"},
    {TQ_FTYPE_TQ4_1S, "MOSTLY_TQ4_1S (fork)"},
    {1024, "GUESSED"},
};
/* clang-format on */

const char *tq_gguf_file_type_name(int64_t ft)
{
    for (size_t i = 0; i < sizeof file_types / sizeof file_types[0]; i++)
        if (file_types[i].id == ft) return file_types[i].name;
    return "unknown";
}

int tq_gguf_file_type_of(int dtype)
{
    return dtype == TQ_DT_TQ4_1S ? TQ_FTYPE_TQ4_1S : TQ_FTYPE_TQ3_1S;
}
