#!/bin/sh
# A fork revision is a row (issue 57): a build with one more row in lib/fork_revisions.c (under
# TQ_FORK_TEST_ROW; no other file edited) knows that revision everywhere: its unit tests walk
# it, its helps list it, and its turbo caches are written and read under its ids.
set -u
. tests/cli/common.inc
make -s build/testrow/tq build/testrow/unit-runner >"$tmp/make.log" 2>&1 ||
    { echo "FAIL: setup: building the test row: $(tail -n 5 "$tmp/make.log")"; exit 1; }
row=./build/testrow/tq
SEEDS=tests/fuzz/seeds/fuzz_state_read

behaviour the_test_row_lives_in_the_table_alone
bad=$(grep -rln 'testrow\|TQ_FORK_TEST_ROW' lib formats cmd kernels | grep -v '^lib/fork_revisions\.c$')
[ -z "$bad" ] || fail "the test revision is named outside the table: $bad"
$tq inspect --fork-rev testrow "$SEEDS/stories16.ggsq" >/dev/null 2>&1 &&
    fail "the ordinary build knows the test revision"

behaviour every_row_of_the_test_build_passes_the_row_tests
./build/testrow/unit-runner every_fork_revision_is_named_once_and_found_by_its_name \
    every_fork_revision_gives_its_ids_the_types_its_row_says \
    every_fork_revision_blocks_build_a_codec_of_their_type \
    golden_kv_decode_every_later_fork_revision >"$tmp/unit" 2>&1 ||
    fail "the row tests: $(grep -v '^ok' "$tmp/unit" | head -n 5)"
[ "$(grep -c '^ok' "$tmp/unit")" -eq 4 ] || fail "$(cat "$tmp/unit")"

behaviour the_helps_list_the_new_row
$row help decode-kvdump | grep -q 'testrow' || fail "decode-kvdump's help leaves it out"
$row help inspect | grep -q 'testrow' || fail "inspect's help leaves it out"
$row inspect --fork-rev bogus x 2>&1 | grep -q 'testrow' || fail "the usage error leaves it out"

behaviour a_turbo_cache_for_the_new_row_is_written_and_read_under_its_ids
$row encode-kvdump "$SEEDS/stories16.ggsq" --head-dim 8 -q -o "$tmp/s.tqkv" || fail "encode"
for type in turbo3 turbo4; do
    $row decode-kvdump "$tmp/s.tqkv" --cache-type $type --head-dim 8 --fork-rev testrow -q \
        -o "$tmp/$type-row.ggsq" || fail "a $type cache for the test row"
    $row decode-kvdump "$tmp/s.tqkv" --cache-type $type --head-dim 8 --fork-rev pr197 -q \
        -o "$tmp/$type-pr197.ggsq" || fail "a $type cache for pr197"
    # the same blocks (the row's are pr197's) under other ids: as many bytes, some differing
    [ "$(wc -c <"$tmp/$type-row.ggsq")" = "$(wc -c <"$tmp/$type-pr197.ggsq")" ] ||
        fail "$type: sizes differ"
    cmp -s "$tmp/$type-row.ggsq" "$tmp/$type-pr197.ggsq" && fail "$type: the ids did not change"
    $row inspect --type-profile testrow "$tmp/$type-row.ggsq" >"$tmp/i" 2>&1 ||
        fail "inspect of the $type cache: $(cat "$tmp/i")"
    grep -q "$type" "$tmp/i" || fail "$type rows not seen: $(cat "$tmp/i")"
    $row encode-kvdump "$tmp/$type-row.ggsq" --type-profile testrow --preset lossless -q \
        -o "$tmp/l.tqkv" || fail "encode of the $type cache"
    $row decode-kvdump "$tmp/l.tqkv" -q -o "$tmp/back.ggsq" || fail "decode"
    cmp -s "$tmp/back.ggsq" "$tmp/$type-row.ggsq" || fail "$type: not back byte for byte"
done

exit 0
