/* runner.c - runs every registered unit test, or those named on the command
 * line. */
#include "harness.h"

#include <stdarg.h>
#include <string.h>

static tq_test *head, **tail = &head;
static int cur_failed, cur_skipped;
static const char *cur_name;

void tq_test_register(tq_test *t)
{
    *tail = t;
    tail = &t->next;
}

int tq_test_failed(void) { return cur_failed; }

int tq_test_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    cur_failed = 1;
    printf("FAIL %s: %s:%d: ", cur_name, file, line);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    return 0;
}

void tq_test_skip(const char *fmt, ...)
{
    va_list ap;
    cur_skipped = 1;
    printf("SKIP: %s: ", cur_name);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

int main(int argc, char **argv)
{
    int failed = 0;
    for (tq_test *t = head; t; t = t->next) {
        if (argc > 1) {
            int want = 0;
            for (int i = 1; i < argc; i++) want |= strcmp(argv[i], t->name) == 0;
            if (!want) continue;
        }
        cur_name = t->name;
        cur_failed = cur_skipped = 0;
        t->fn();
        if (!cur_failed && !cur_skipped) printf("ok %s\n", t->name);
        failed |= cur_failed;
        fflush(stdout);
    }
    return failed;
}
