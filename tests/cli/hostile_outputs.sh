#!/bin/sh
# Outputs and inputs against what is not a regular file, and interruptions (issue 47): -o onto
# a device, FIFO or link writes into it as a stream and never replaces it; standard input of no
# known kind is refused before it is copied; a killed decode leaves no temporary file; --layers
# past the snapshot's layers is one line and exit 1; an output that would overwrite its input is
# exit 1 in every subcommand, as any failure.  Run as root (CI) too: a device is never replaced.
set -u
. tests/cli/common.inc
SEEDS=tests/fuzz/seeds/fuzz_state_read
# a folder no case names: hashed before and after every case
mkdir -p "$tmp/sentinel" && echo precious >"$tmp/sentinel/keep.txt"
sentinel() { (cd "$tmp/sentinel" && find . -exec ls -ld {} + | sort; cat ./* 2>/dev/null) | cksum; }
before=$(sentinel)
$tq encode-kvdump $SEEDS/stories16.ggsq --head-dim 8 -q -o "$tmp/s.tqkv" || fail "encode"
$tq decode-kvdump "$tmp/s.tqkv" -q -o "$tmp/want.ggsq" || fail "decode"

behaviour a_device_output_is_written_into_not_replaced
$tq decode-kvdump "$tmp/s.tqkv" -q -o /dev/null || fail "-o /dev/null exited $?"
[ -c /dev/null ] || fail "/dev/null is no longer a device"
ls /dev/null.tmp.* >/dev/null 2>&1 && fail "a temporary file beside /dev/null"
expect_err 1 "No space left" decode-kvdump "$tmp/s.tqkv" -q -o /dev/full
[ -c /dev/full ] || fail "/dev/full is no longer a device"

behaviour a_fifo_output_streams_to_its_reader
mkfifo "$tmp/fifo" || fail "mkfifo"
cat "$tmp/fifo" >"$tmp/from_fifo" &
$tq decode-kvdump "$tmp/s.tqkv" -q -o "$tmp/fifo" || fail "-o FIFO exited $?"
wait
[ -p "$tmp/fifo" ] || fail "the FIFO was replaced"
cmp -s "$tmp/from_fifo" "$tmp/want.ggsq" || fail "the FIFO's reader got other bytes"

behaviour a_link_to_a_file_is_replaced_where_it_points
echo old >"$tmp/target"
ln -s "$tmp/target" "$tmp/link"
$tq decode-kvdump "$tmp/s.tqkv" -q -o "$tmp/link" || fail "-o LINK exited $?"
[ -L "$tmp/link" ] || fail "the link was replaced by a file"
cmp -s "$tmp/target" "$tmp/want.ggsq" || fail "the link's target does not hold the output"
ln -s "$tmp/nowhere" "$tmp/dangling"
expect_err 1 "a link to nothing" decode-kvdump "$tmp/s.tqkv" -q -o "$tmp/dangling"

behaviour stdin_of_no_known_kind_is_refused_before_it_is_copied
for cmd in "inspect -" "encode-kvdump - -o $tmp/x.tqkv"; do
    head -c 50000000 /dev/zero | TMPDIR=$tmp/spool $tq $cmd >"$tmp/o" 2>"$tmp/e"; rc=$?
    [ $rc = 1 ] || fail "'$cmd' of zeros exited $rc: $(cat "$tmp/e")"
    [ "$(wc -l <"$tmp/e")" -eq 1 ] || fail "'$cmd': not one line: $(cat "$tmp/e")"
    grep -q "magic" "$tmp/e" || fail "'$cmd': $(cat "$tmp/e")"
done
[ -e "$tmp/x.tqkv" ] && fail "an output was written"

behaviour a_killed_decode_leaves_no_temporary_file
make -s build/tests/kv-state >/dev/null 2>&1 || fail "building kv-state"
./build/tests/kv-state "$tmp/big.ggsn" 4000 8 || fail "kv-state"
$tq encode-kvdump "$tmp/big.ggsn" -q -o "$tmp/big.tqkv" || fail "encode big"
for sig in INT TERM; do
    $tq decode-kvdump "$tmp/big.tqkv" -q -o "$tmp/out/big.ggsn" 2>/dev/null &
    pid=$!
    mkdir -p "$tmp/out"
    # until its temporary file is there (or it is done), then the signal
    i=0
    while [ $i -lt 200 ] && ! ls "$tmp/out/" 2>/dev/null | grep -q tmp && kill -0 $pid 2>/dev/null; do
        sleep 0.01; i=$((i + 1))
    done
    kill -$sig $pid 2>/dev/null
    wait $pid 2>/dev/null
    left=$(ls "$tmp/out" | grep '\.tmp\.' || true)
    [ -z "$left" ] || fail "SIG$sig left $left"
    rm -rf "$tmp/out"
done

behaviour layers_past_the_snapshot_are_one_line
expect_err 1 "holds layers 0-4" decode-kvdump "$tmp/s.tqkv" --format npz --layers 5-5 -o "$tmp/l.npz"
expect_err 1 "holds layers 0-4" decode-kvdump "$tmp/s.tqkv" --format npz --layers 0-99 -o "$tmp/l.npz"
[ -e "$tmp/l.npz" ] && fail "an output was written"

behaviour overwriting_the_input_is_exit_1_everywhere
cp "$tmp/s.tqkv" "$tmp/same.tqkv"
expect_err 1 "would overwrite the input" decode-kvdump "$tmp/same.tqkv" -o "$tmp/same.tqkv"
cp $SEEDS/stories16.ggsq "$tmp/same.ggsq"
expect_err 1 "would overwrite the input" encode-kvdump "$tmp/same.ggsq" --head-dim 8 -o "$tmp/same.ggsq"
behaviour the_sanitizer_builds_make_their_folder
make -n B="$tmp/cleanbuild" "$tmp/cleanbuild/tests/tq-san" 2>/dev/null |
    grep -q "mkdir -p $tmp/cleanbuild/tests/" || fail "make's tq-san recipe makes no folder for it"

behaviour nothing_outside_the_named_outputs_changed
[ "$(sentinel)" = "$before" ] || fail "the sentinel folder changed"
exit 0
