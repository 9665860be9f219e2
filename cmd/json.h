/* json.h - the few helpers the subcommands need to print JSON to a stream:
 * escaped strings and numbers that stay valid JSON (non-finite -> null). */
#ifndef TQ_JSON_H
#define TQ_JSON_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

void json_str(FILE *f, const char *s, uint64_t len); /* quoted, escaped */
void json_cstr(FILE *f, const char *s);
void json_double(FILE *f, double v, int digits); /* %.{digits}g or null */

/* jansson values: a number rounded to `digits` significant digits (an integer where it is
 * one, null where it is not finite: jansson refuses NaN); a string whose invalid UTF-8
 * bytes become U+FFFD (names come from files: jansson refuses invalid UTF-8). */
json_t *json_num(double v, int digits);
json_t *json_text(const char *s);
/* The one JSON writer of tq's reports: doc (an object, taken) laid out as a line a part, its
 * members on the first line but for those named in own_line (NULL-terminated), each on a line
 * of its own, and the arrays named in rows an element a line; every key and value is written
 * by jansson (reals as json_write's).  0, or -1 when it could not. */
typedef struct json_layout {
    const char *const *own_line;
    const char *const *rows;
} json_layout;
int json_write_report(FILE *f, json_t *doc, const json_layout *layout);
/* Writes doc (taking it) and a newline to f through jansson (reals as the 15 digits that give
 * back json_num's rounding); 0, or -1 when it could not. */
int json_write(FILE *f, json_t *doc);

#endif
