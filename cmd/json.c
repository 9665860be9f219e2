/* json.c - JSON output helpers. */
#include "json.h"

#include <math.h>
#include <string.h>

void json_str(FILE *f, const char *s, uint64_t len)
{
    /* the characters JSON escapes with a letter; other controls as \u00XX */
    static const char *const escape[128] = {
        ['"'] = "\\\"", ['\\'] = "\\\\", ['\n'] = "\\n", ['\r'] = "\\r", ['\t'] = "\\t",
    };
    fputc('"', f);
    for (uint64_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 128 && escape[c])
            fputs(escape[c], f);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

void json_cstr(FILE *f, const char *s) { json_str(f, s, strlen(s)); }

void json_double(FILE *f, double v, int digits)
{
    if (!isfinite(v))
        fputs("null", f);
    else
        fprintf(f, "%.*g", digits, v);
}
