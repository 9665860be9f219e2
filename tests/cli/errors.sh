#!/bin/sh
# What a user meets when asking for help or when a write fails: `--help`
# after any subcommand is its usage on stdout with status 0; a full disk is
# one line that names the cause, exit 1, and no partial output.
set -u
. tests/cli/common.inc
S=tests/fuzz/seeds/fuzz_state_read/stories16.ggsq

behaviour every_subcommand_help_prints_its_usage
for sub in rotate-weights quantize-tq4 calibrate-innerq encode-kvdump decode-kvdump inspect bench; do
    for flag in --help -h; do
        $tq $sub $flag >"$tmp/o" 2>"$tmp/e"
        rc=$?
        [ $rc -eq 0 ] || fail "tq $sub $flag exited $rc: $(cat "$tmp/e")"
        grep -q "^usage: tq $sub" "$tmp/o" || fail "tq $sub $flag: no usage line: $(head -2 "$tmp/o")"
        [ -s "$tmp/e" ] && fail "tq $sub $flag wrote to stderr: $(cat "$tmp/e")"
    done
done
# after other arguments too, as git and zstd take it
$tq decode-kvdump x.tqkv -o y --help >"$tmp/o" 2>&1 || fail "help after arguments exited $?"
grep -q '^usage: tq decode-kvdump' "$tmp/o" || fail "help after arguments: $(head -1 "$tmp/o")"

behaviour decode_on_a_full_disk_names_the_cause
$tq encode-kvdump "$S" -o "$tmp/s.tqkv" --head-dim 8 -q || fail "encode"
(ulimit -f 1; trap '' XFSZ; exec $tq decode-kvdump "$tmp/s.tqkv" -o "$tmp/full.ggsq") >"$tmp/o" 2>"$tmp/e"
rc=$?
[ $rc -eq 1 ] || fail "exit $rc, expected 1: $(cat "$tmp/e")"
[ "$(wc -l <"$tmp/e")" -eq 1 ] || fail "not one line: $(cat "$tmp/e")"
grep -q 'writing the state file failed: File too large' "$tmp/e" || fail "no cause: $(cat "$tmp/e")"
[ -e "$tmp/full.ggsq" ] && fail "partial output after a write error"
ls "$tmp" | grep -q '\.tmp\.' && fail "temporary file left: $(ls "$tmp")"

# full_disk OUT NEEDLE ARGS...: tq ARGS -o OUT under a 1-block file-size limit
# fails with exit 1, one line containing NEEDLE, and leaves no OUT behind
full_disk() {
    out=$1 needle=$2
    shift 2
    (ulimit -f 1; trap '' XFSZ; exec $tq "$@" -o "$out") >"$tmp/o" 2>"$tmp/e"
    rc=$?
    [ $rc -eq 1 ] || fail "exit $rc, expected 1: $(cat "$tmp/e")"
    [ "$(wc -l <"$tmp/e")" -eq 1 ] || fail "not one line: $(cat "$tmp/e")"
    grep -q "$needle" "$tmp/e" || fail "no cause: $(cat "$tmp/e")"
    [ -e "$out" ] && fail "partial output after a write error"
    return 0
}

behaviour decode_to_npz_on_a_full_disk_names_the_cause
full_disk "$tmp/full.npz" 'File too large' decode-kvdump "$tmp/s.tqkv" --format npz

behaviour encode_on_a_full_disk_names_the_cause
full_disk "$tmp/full.tqkv" 'File too large' encode-kvdump "$S" --preset lossless
behaviour a_name_holding_controls_is_told_in_one_line
# a path with a newline, a tab and an escape: the message shows them as \xNN, on one line
odd=$(printf '%s/n\nt\te\033x' "$tmp")
printf 'hi' >"$odd"
expect_err 1 'n\\x0at\\x09e\\x1bx' encode-kvdump "$odd" -o "$tmp/odd.tqkv"
expect_err 1 'n\\x0at\\x09e\\x1bx' inspect "$odd"
[ -e "$tmp/odd.tqkv" ] && fail "an output was left"

exit 0
