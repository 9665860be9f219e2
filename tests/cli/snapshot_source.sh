#!/bin/sh
# A .tqkv snapshot is a KV source like a state file (formats/snapshot/
# kv_snapshot_view.c bids on it): calibrate-innerq and bench read it; the
# decoded state goes to $TMPDIR, and a snapshot there unreadable is one line.
set -u
. tests/cli/common.inc
S=tests/fuzz/seeds/fuzz_state_read/stories16.ggsq

behaviour a_lossless_snapshot_calibrates_like_its_state
$tq encode-kvdump "$S" --preset lossless -o "$tmp/l.tqkv" -q || fail "encode"
$tq calibrate-innerq "$S" --head-dim 8 --min-tokens 8 -o "$tmp/a.gguf" 2>"$tmp/ea" || fail "$(cat "$tmp/ea")"
$tq calibrate-innerq "$tmp/l.tqkv" --head-dim 8 --min-tokens 8 -o "$tmp/b.gguf" 2>"$tmp/eb" ||
    fail "calibrating on the snapshot: $(cat "$tmp/eb")"
ka=$(sed -n 's/.*\(K scales [^,]*\),.*/\1/p' "$tmp/ea")
kb=$(sed -n 's/.*\(K scales [^,]*\),.*/\1/p' "$tmp/eb")
[ -n "$ka" ] && [ "$ka" = "$kb" ] || fail "state gives '$ka', its snapshot '$kb'"

behaviour the_decoded_state_goes_to_tmpdir
mkdir "$tmp/t"
TMPDIR="$tmp/t" $tq calibrate-innerq "$tmp/l.tqkv" --head-dim 8 --min-tokens 8 -o "$tmp/c.gguf" -q ||
    fail "with TMPDIR set"
[ -z "$(ls -A "$tmp/t")" ] || fail "intermediate file left in TMPDIR: $(ls "$tmp/t")"
TMPDIR="$tmp/none" $tq calibrate-innerq "$tmp/l.tqkv" --head-dim 8 --min-tokens 8 -o "$tmp/d.gguf" \
    >"$tmp/o" 2>"$tmp/e"
rc=$?
[ $rc -eq 1 ] || fail "a missing TMPDIR: exit $rc"
grep -q "$tmp/none/tq-snapshot" "$tmp/e" || fail "the message does not name TMPDIR: $(cat "$tmp/e")"
[ -e "$tmp/d.gguf" ] && fail "output written after a failure"

exit 0
