#!/bin/sh
# quantize-tq4 and rotate-weights stream tensors in slices of rows; a build
# with 100-value slices (build/tests/tq-slice100: every slice one row) must
# write exactly the same bytes as the normal build.
set -u
. tests/cli/common.inc
need_stories
small=build/tests/tq-slice100
[ -x $small ] || { echo "build/tests/tq-slice100 missing (make test builds it)"; exit 1; }
for args in "rotate-weights" "quantize-tq4 --policy all" "quantize-tq4 --type tq3_1s --simulate"; do
    $tq $args -q "$M" "$tmp/a.gguf" || fail "$args"
    $small $args -q "$M" "$tmp/b.gguf" || fail "$args (slices of 100)"
    cmp -s "$tmp/a.gguf" "$tmp/b.gguf" || fail "$args: slicing changed the output"
done
exit 0
