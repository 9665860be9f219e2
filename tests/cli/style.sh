#!/bin/sh
# The layout rules of lib/, formats/, cmd/ and kernels/ (DEVELOPERS style):
# no line over 100 columns, one statement a line, no nested conditional
# operators (tests/tools/style_check.py), no comma-operator statements
# (clang's -Wcomma; skipped where clang is missing).
set -u
. tests/cli/common.inc
src="lib/*.[ch] lib/*.inc formats/*/*.[ch] cmd/*.[ch] kernels/*.cu"

behaviour lines_statements_and_conditionals_keep_the_layout
command -v python3 >/dev/null || { echo "python3 needed"; exit 77; }
# shellcheck disable=SC2086
out=$(python3 tests/tools/style_check.py $src) || fail "$(printf '%s\n' "$out" | head -n 20)"

behaviour the_checker_sees_a_nested_conditional_and_a_long_line
printf 'int f(int a) { return a ? 1 : a > 2 ? 3 : 4; }\n' >"$tmp/n.c"
python3 tests/tools/style_check.py "$tmp/n.c" | grep -q 'nested conditional' || fail "nested ternary not seen"
printf 'int x%0100d;\n' 0 >"$tmp/l.c"
python3 tests/tools/style_check.py "$tmp/l.c" | grep -q 'columns' || fail "long line not seen"

behaviour no_comma_operator_statements
command -v clang >/dev/null || { echo "clang not installed: the comma check needs -Wcomma"; exit 77; }
flags="-fsyntax-only -std=gnu11 -fopenmp -Ilib -Iformats/tqkv -Iformats/gguf -Iformats/state \
-Iformats/io -Iformats/store -Iformats/model -Iformats/snapshot -Iformats/weights -Icmd \
-Wcomma -mavx2 -mf16c -mavx512f -mavx512bw -mavx512dq -mavx512vl"
for f in lib/*.c formats/*/*.c cmd/*.c; do
    # shellcheck disable=SC2086
    clang $flags "$f" 2>&1 | grep 'possible misuse of comma' && fail "comma operator in $f"
done
exit 0
