/* json.h - the few helpers the subcommands need to print JSON to a stream:
 * escaped strings and numbers that stay valid JSON (non-finite -> null). */
#ifndef TQ_JSON_H
#define TQ_JSON_H

#include <stdint.h>
#include <stdio.h>

void json_str(FILE *f, const char *s, uint64_t len); /* quoted, escaped */
void json_cstr(FILE *f, const char *s);
void json_double(FILE *f, double v, int digits); /* %.{digits}g or null */

#endif
