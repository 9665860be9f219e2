#!/bin/sh
# The seams hold (../shared/reference/architecture.md): formats/ and cmd/ use
# libtq only through lib/tq.h; the KV sources do not know each other; no
# function in formats/ or cmd/ runs over 100 lines.
set -u
. tests/cli/common.inc
bad=$(grep -ln '#include "\(tq_internal\|tq_fwht\|tq_half\)\.h"' formats/*.[ch] cmd/*.[ch])
[ -z "$bad" ] || fail "lib internal headers included by: $bad"
for src in llama_state llama_state_write; do
    grep -n 'kv_numpy\|tq_numpy\|TQNI' formats/$src.c && fail "formats/$src.c refers to the NumPy source"
done
for src in kv_numpy kv_numpy_write; do
    grep -n 'llama_state\|tq_llama\|GGSN\|GGSQ' formats/$src.c && fail "formats/$src.c refers to the llama.cpp state source"
done
grep -q 'tq_numpy_open_memory' tests/fuzz/fuzz_numpy_read.c || fail "the NumPy fuzz target must call the NumPy reader"
# functions: a line starting an identifier with '(' up to the '{' and '}' in
# column 0 (the layout every file here uses)
long=$(awk 'FNR == 1 { head = 0 }
    /^[A-Za-z_].*\(/ && !/;[ \t]*$/ { head = FNR; name = $0 }
    /^\{/ { start = head }
    /^\}/ && start { if (FNR - start + 1 > 100) printf "%s:%d %d lines: %s\n", FILENAME, start, FNR - start + 1, name; start = 0 }' \
    formats/*.c cmd/*.c)
[ -z "$long" ] || fail "functions over 100 lines:
$long"
exit 0
