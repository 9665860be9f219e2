/* npy.c - the .npy header (see npy.h).  The dict is parsed, not pattern
 * matched: numpy writes keys in sorted order with fixed spacing, but other
 * writers (and hostile files) need not. */
#include "npy.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct lex {
    const char *p, *end;
} lex;

static void skip_ws(lex *l)
{
    while (l->p < l->end && (*l->p == ' ' || *l->p == '\t' || *l->p == '\n' || *l->p == '\r'))
        l->p++;
}

static int eat(lex *l, char c)
{
    skip_ws(l);
    if (l->p < l->end && *l->p == c) {
        l->p++;
        return 1;
    }
    return 0;
}

/* A Python string literal in single or double quotes, no escapes (numpy
 * never writes any in the keys and simple descrs). */
static int string_lit(lex *l, char *out, size_t cap)
{
    skip_ws(l);
    if (l->p >= l->end || (*l->p != '\'' && *l->p != '"')) return -1;
    char q = *l->p++;
    size_t n = 0;
    while (l->p < l->end && *l->p != q) {
        if (*l->p == '\\' || n + 1 >= cap) return -1;
        out[n++] = *l->p++;
    }
    if (l->p >= l->end) return -1;
    l->p++;
    out[n] = 0;
    return 0;
}

/* Skips a value we do not interpret (a structured descr: lists, tuples,
 * strings nested to any depth). */
static int skip_value(lex *l)
{
    int depth = 0;
    skip_ws(l);
    while (l->p < l->end) {
        char c = *l->p;
        if (c == '\'' || c == '"') {
            l->p++;
            while (l->p < l->end && *l->p != c) l->p += *l->p == '\\' ? 2 : 1;
            if (l->p >= l->end) return -1;
            l->p++;
            continue;
        }
        if (c == '[' || c == '(' || c == '{')
            depth++;
        else if (c == ']' || c == ')' || c == '}') {
            if (!depth) return 0;
            depth--;
        } else if (c == ',' && !depth)
            return 0;
        l->p++;
    }
    return -1;
}

static uint32_t itemsize_of(const char *d)
{
    static const char *const known[] = {"<f4", "<f2", "<f8", "<i4", "<i8", "<u4",
                                        "<i2", "<u2", "|i1", "|u1", "|b1", "<u8"};
    static const uint32_t size[] = {4, 2, 8, 4, 8, 4, 2, 2, 1, 1, 1, 8};
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (!strcmp(d, known[i])) return size[i];
    return 0;
}

static int fail(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return -1;
}

/* The header's length and where it starts (versions 1: a u16 length; 2, 3: a u32). */
static int preamble(const uint8_t *p, uint64_t size, uint32_t *hlen, uint32_t *pre, char *err,
                    size_t errlen)
{
    uint32_t major = p[6];
    if (major == 1) {
        *hlen = (uint32_t)p[8] | (uint32_t)p[9] << 8;
        *pre = 10;
        return 0;
    }
    if (major != 2 && major != 3)
        return fail(err, errlen, ".npy format version %u.%u is not one tq reads (1, 2, 3)", major,
                    p[7]);
    if (size < 12) return fail(err, errlen, "truncated .npy header");
    *hlen = (uint32_t)p[8] | (uint32_t)p[9] << 8 | (uint32_t)p[10] << 16 | (uint32_t)p[11] << 24;
    *pre = 12;
    return 0;
}

/* The shape tuple "(a, b, ...)" into h->shape and h->ndim. */
static int shape_tuple(lex *l, tq_npy_header *h, char *err, size_t errlen)
{
    if (!eat(l, '(')) return fail(err, errlen, ".npy shape is not a tuple");
    while (!eat(l, ')')) {
        skip_ws(l);
        uint64_t v = 0;
        int digits = 0;
        while (l->p < l->end && *l->p >= '0' && *l->p <= '9') {
            if (v > (UINT64_MAX - 9) / 10) return fail(err, errlen, ".npy shape value overflows");
            v = v * 10 + (uint64_t)(*l->p++ - '0');
            digits++;
        }
        if (l->p < l->end && *l->p == 'L') l->p++; /* Python 2 longs */
        if (!digits || h->ndim == TQ_NPY_MAX_DIMS)
            return fail(err, errlen, ".npy shape is malformed or has more than %d dimensions",
                        TQ_NPY_MAX_DIMS);
        h->shape[h->ndim++] = v;
        if (!eat(l, ',')) {
            if (!eat(l, ')')) return fail(err, errlen, ".npy shape is malformed");
            break;
        }
    }
    return 0;
}

int tq_npy_parse(const uint8_t *p, uint64_t size, tq_npy_header *h, char *err, size_t errlen)
{
    memset(h, 0, sizeof *h);
    if (size < 10 || memcmp(p, "\x93NUMPY", 6))
        return fail(err, errlen, "not a .npy array (no \\x93NUMPY magic)");
    uint32_t hlen = 0, pre = 0;
    if (preamble(p, size, &hlen, &pre, err, errlen)) return -1;
    if (hlen > TQ_NPY_MAX_HEADER)
        return fail(err, errlen, ".npy header of %u bytes is implausible", hlen);
    if (hlen > size - pre)
        return fail(err, errlen, "truncated .npy header (%u bytes, %llu present)", hlen,
                    (unsigned long long)(size - pre));
    h->header_len = pre + hlen;
    lex l = {(const char *)p + pre, (const char *)p + pre + hlen};
    int seen_descr = 0, seen_order = 0, seen_shape = 0;
    if (!eat(&l, '{')) return fail(err, errlen, ".npy header is not a dict");
    while (!eat(&l, '}')) {
        char key[32];
        if (string_lit(&l, key, sizeof key) || !eat(&l, ':'))
            return fail(err, errlen, ".npy header dict is malformed");
        if (!strcmp(key, "descr") && !seen_descr) {
            seen_descr = 1;
            skip_ws(&l);
            lex save = l;
            if (string_lit(&l, h->descr, sizeof h->descr)) {
                h->descr[0] = 0;
                l = save;
                if (skip_value(&l)) return fail(err, errlen, ".npy descr is malformed");
            }
        } else if (!strcmp(key, "fortran_order") && !seen_order) {
            seen_order = 1;
            skip_ws(&l);
            if ((size_t)(l.end - l.p) >= 4 && !memcmp(l.p, "True", 4)) {
                h->fortran_order = 1;
                l.p += 4;
            } else if ((size_t)(l.end - l.p) >= 5 && !memcmp(l.p, "False", 5))
                l.p += 5;
            else
                return fail(err, errlen, ".npy fortran_order is not True or False");
        } else if (!strcmp(key, "shape") && !seen_shape) {
            seen_shape = 1;
            if (shape_tuple(&l, h, err, errlen)) return -1;
        } else {
            return fail(err, errlen, ".npy header has an unknown or repeated key '%s'", key);
        }
        if (!eat(&l, ',')) {
            if (!eat(&l, '}')) return fail(err, errlen, ".npy header dict is malformed");
            break;
        }
    }
    skip_ws(&l);
    if (l.p != l.end) return fail(err, errlen, ".npy header has bytes after the dict");
    if (!seen_descr || !seen_order || !seen_shape)
        return fail(err, errlen, ".npy header lacks descr, fortran_order or shape");
    h->itemsize = itemsize_of(h->descr);
    h->count = 1;
    for (int i = 0; i < h->ndim; i++) {
        if (h->shape[i] && h->count > UINT64_MAX / 16 / h->shape[i])
            return fail(err, errlen, ".npy shape overflows");
        h->count *= h->shape[i];
    }
    return 0;
}

uint32_t tq_npy_format(char *out, const char *descr, int ndim, const uint64_t *shape)
{
    char dict[64 + 24 * TQ_NPY_MAX_DIMS];
    int n =
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < ndim; i++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%llu,%s", (unsigned long long)shape[i],
                      i + 1 < ndim ? " " : "");
    if (ndim > 1) n--; /* numpy writes (5,) but (2, 3) */
    n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");
    uint32_t total = (uint32_t)(10 + n + 1 + 63) / 64 * 64;
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    uint32_t hlen = total - 10;
    out[8] = (char)(hlen & 0xff);
    out[9] = (char)(hlen >> 8);
    memcpy(out + 10, dict, (size_t)n);
    memset(out + 10 + n, ' ', total - 10 - (uint32_t)n - 1);
    out[total - 1] = '\n';
    return total;
}
