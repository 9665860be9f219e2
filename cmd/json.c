/* json.c - JSON output helpers. */
#include "json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The length of the valid UTF-8 sequence at s (n bytes left), or 0 where it is not one. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t len = 0;
    unsigned min = 0;
    unsigned cp = 0;
    if (s[0] < 0x80) return 1;
    if ((s[0] & 0xe0) == 0xc0) {
        len = 2;
        min = 0x80;
        cp = s[0] & 0x1f;
    } else if ((s[0] & 0xf0) == 0xe0) {
        len = 3;
        min = 0x800;
        cp = s[0] & 0x0f;
    } else if ((s[0] & 0xf8) == 0xf0) {
        len = 4;
        min = 0x10000;
        cp = s[0] & 0x07;
    } else {
        return 0;
    }
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    int surrogate = cp >= 0xd800 && cp <= 0xdfff;
    return cp < min || cp > 0x10ffff || surrogate ? 0 : len;
}

json_t *json_num(double v, int digits)
{
    if (!isfinite(v)) return json_null();
    char shown[64];
    snprintf(shown, sizeof shown, "%.*g", digits, v);
    double rounded = strtod(shown, NULL);
    if (rounded == 0 && signbit(rounded)) return json_real(rounded); /* -0 keeps its sign */
    if (fabs(rounded) < 9e15 && rounded == floor(rounded)) return json_integer((json_int_t)rounded);
    return json_real(rounded);
}

json_t *json_decimals(double v, int places)
{
    if (!isfinite(v)) return json_null();
    char shown[352]; /* [352]: DBL_MAX's 309 digits and the places asked */
    snprintf(shown, sizeof shown, "%.*f", places, v);
    return json_num(strtod(shown, NULL), 17);
}

json_t *json_text(const char *s) { return json_textn(s, strlen(s)); }

json_t *json_textn(const char *s, size_t n)
{
    char *clean = malloc(3 * n + 1); /* [3n + 1]: each byte at most U+FFFD's three */
    if (!clean) return NULL;
    size_t out = 0;
    for (size_t i = 0; i < n;) {
        size_t len = utf8_len((const unsigned char *)s + i, n - i);
        if (len) {
            memcpy(clean + out, s + i, len);
            out += len;
            i += len;
        } else {
            memcpy(clean + out, "\xef\xbf\xbd", 3);
            out += 3;
            i++;
        }
    }
    json_t *text = json_stringn(clean, out);
    free(clean);
    return text;
}

int json_write(FILE *f, json_t *doc)
{
    if (!doc) return -1;
    int bad = json_dumpf(doc, f, JSON_INDENT(1) | JSON_REAL_PRECISION(15)) || fputc('\n', f) == EOF;
    json_decref(doc);
    return bad ? -1 : 0;
}

static int named(const char *const *names, const char *key)
{
    for (size_t i = 0; names && names[i]; i++)
        if (!strcmp(names[i], key)) return 1;
    return 0;
}

/* One key or value as jansson writes it. */
static int put_json(FILE *f, const json_t *v)
{
    char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));
    int bad = !text || fputs(text, f) == EOF;
    free(text);
    return bad;
}

static int put_rows(FILE *f, const json_t *array)
{
    size_t i;
    const json_t *elem;
    int bad = fputc('[', f) == EOF;
    json_array_foreach(array, i, elem)
    {
        bad |= fputs(i ? ",\n  " : "\n  ", f) == EOF;
        bad |= put_json(f, elem);
    }
    return bad | (fputs("\n ]", f) == EOF);
}

int json_write_report(FILE *f, json_t *doc, const json_layout *layout)
{
    if (!json_is_object(doc)) {
        json_decref(doc);
        return -1;
    }
    const char *key;
    const json_t *value;
    int first = 1;
    int bad = fputc('{', f) == EOF;
    json_object_foreach(doc, key, value)
    {
        if (!first) bad |= fputs(named(layout->own_line, key) ? ",\n " : ", ", f) == EOF;
        first = 0;
        json_t *k = json_string(key);
        bad |= !k || put_json(f, k) || fputs(": ", f) == EOF;
        json_decref(k);
        if (json_is_array(value) && named(layout->rows, key))
            bad |= put_rows(f, value);
        else
            bad |= put_json(f, value);
    }
    bad |= fputs(layout->close_own_line ? "\n}\n" : "}\n", f) == EOF;
    json_decref(doc);
    return bad ? -1 : 0;
}
