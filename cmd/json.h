/* json.h - tq's one JSON writer and the values it writes: every key, string and number
 * of a --json report is written by jansson; numbers stay valid JSON (non-finite -> null). */
#ifndef TQ_JSON_H
#define TQ_JSON_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

/* jansson values: a number rounded to `digits` significant digits (an integer where it is
 * one, null where it is not finite: jansson refuses NaN); a string whose invalid UTF-8
 * bytes become U+FFFD (names come from files: jansson refuses invalid UTF-8). */
json_t *json_num(double v, int digits);
json_t *json_text(const char *s);
json_t *json_textn(const char *s, size_t n); /* n bytes, NULs among them */
/* a number rounded to `places` decimals (a report's fixed-point column), as json_num writes it */
json_t *json_decimals(double v, int places);
/* The one JSON writer of tq's reports: doc (an object, taken) laid out as a line a part, its
 * members on the first line but for those named in own_line (NULL-terminated), each on a line
 * of its own, and the arrays named in rows an element a line; every key and value is written
 * by jansson (reals as json_write's).  0, or -1 when it could not. */
typedef struct json_layout {
    const char *const *own_line;
    const char *const *rows;
    int close_own_line; /* the closing brace on a line of its own */
} json_layout;
int json_write_report(FILE *f, json_t *doc, const json_layout *layout);
/* Writes doc (taking it) and a newline to f through jansson (reals as the 15 digits that give
 * back json_num's rounding); 0, or -1 when it could not. */
int json_write(FILE *f, json_t *doc);

#endif
