#!/bin/sh
# "-" for every input and output of encode-kvdump, decode-kvdump and inspect (formats/io/io.h):
# a snapshot read from a pipe streams (no seek, a window of chunks in memory) and verifies every
# chunk, the index and the trailer; a state to encode is copied to $TMPDIR first (its plan reads
# it whole).  Through pipes the bytes are those through files.
set -u
. tests/cli/common.inc
SEEDS=tests/fuzz/seeds
SHARED=${TQ_SHARED:-../shared}
make -s build/tests/kv-state >/dev/null 2>&1 || fail "building kv-state"
# a Llama-8B-shaped state of 3000 cells and 4 layers: 24 chunks, more than the decoder's window
./build/tests/kv-state "$tmp/8b.ggsn" 3000 4 || fail "kv-state"
sources="$SEEDS/fuzz_state_read/iswa.ggsn $SEEDS/fuzz_state_read/stories16.ggsq
 $SEEDS/fuzz_numpy_read/per_layer.npz $SEEDS/fuzz_numpy_read/stack.npy $tmp/8b.ggsn"
[ -f "$SHARED/fixtures/llama-state/p1_f16_vtrans.ggsn" ] &&
    sources="$sources $SHARED/fixtures/llama-state/p1_f16_vtrans.ggsn"

behaviour a_pipe_round_trip_gives_the_bytes_files_give
for s in $sources; do
    for preset in lossless balanced; do
        $tq encode-kvdump "$s" --preset $preset -q -o "$tmp/f.tqkv" || fail "$s: encode"
        $tq decode-kvdump "$tmp/f.tqkv" -q -o "$tmp/f.out" || fail "$s: decode"
        $tq encode-kvdump "$s" --preset $preset -q -o - | $tq decode-kvdump - -q -o "$tmp/p.out" ||
            fail "$s $preset: the pipe failed"
        cmp -s "$tmp/f.out" "$tmp/p.out" || fail "$s $preset: the pipe's bytes differ"
        cat "$s" | $tq encode-kvdump - --preset $preset -q -o "$tmp/i.tqkv" || fail "$s: stdin"
        cmp -s "$tmp/f.tqkv" "$tmp/i.tqkv" || fail "$s $preset: a state from stdin codes otherwise"
    done
done

behaviour inspect_reads_a_snapshot_from_a_pipe_as_from_its_file
$tq encode-kvdump "$tmp/8b.ggsn" -q -o "$tmp/s.tqkv" || fail "encode"
$tq inspect "$tmp/s.tqkv" | sed "1s|$tmp/s.tqkv|-|" >"$tmp/file.txt"
cat "$tmp/s.tqkv" | $tq inspect - >"$tmp/pipe.txt" || fail "inspect -"
cmp -s "$tmp/pipe.txt" "$tmp/file.txt" || fail "the reports differ: $(diff "$tmp/file.txt" "$tmp/pipe.txt")"
grep -q "integrity verified: header, metadata, index, [0-9]* chunks" "$tmp/pipe.txt" ||
    fail "the first line: $(head -n 1 "$tmp/pipe.txt")"
$tq inspect --json "$tmp/s.tqkv" | sed "s|$tmp/s.tqkv|-|" >"$tmp/file.json"
cat "$tmp/s.tqkv" | $tq inspect --json - | cmp -s - "$tmp/file.json" || fail "--json differs"
cat "$tmp/8b.ggsn" | $tq inspect - | head -n 1 | grep -q "^file: *- (" ||
    fail "a state from a pipe is not named '-'"

behaviour decode_options_on_a_pipe_give_the_bytes_files_give
for opt in "--tokens 1000" "--format npz" "--format npz --layers 1-2" "--cache-type f32"; do
    # shellcheck disable=SC2086
    $tq decode-kvdump "$tmp/s.tqkv" $opt -q -o "$tmp/f.out" || fail "$opt: file"
    # shellcheck disable=SC2086
    cat "$tmp/s.tqkv" | $tq decode-kvdump - $opt -q -o "$tmp/p.out" || fail "$opt: pipe"
    cmp -s "$tmp/f.out" "$tmp/p.out" || fail "$opt: the bytes differ"
done

behaviour an_appended_snapshot_from_a_pipe_takes_its_base
./build/tests/kv-state "$tmp/short.ggsn" 2000 4 || fail "kv-state"
$tq encode-kvdump "$tmp/short.ggsn" -q -o "$tmp/base.tqkv" || fail "base"
$tq encode-kvdump "$tmp/8b.ggsn" --append "$tmp/base.tqkv" -q -o "$tmp/tail.tqkv" || fail "append"
$tq decode-kvdump "$tmp/tail.tqkv" -q -o "$tmp/f.out" || fail "file"
cat "$tmp/tail.tqkv" | $tq decode-kvdump - --base "$tmp/base.tqkv" -q -o "$tmp/p.out" || fail "pipe"
cmp -s "$tmp/f.out" "$tmp/p.out" || fail "the bytes differ"
cat "$tmp/base.tqkv" | $tq encode-kvdump "$tmp/8b.ggsn" --append - -q -o "$tmp/tail2.tqkv" ||
    fail "a base from stdin"

behaviour every_kind_of_snapshot_decodes_through_a_pipe_as_from_its_file
for s in $SEEDS/fuzz_tqkv_read/*.tqkv; do
    $tq decode-kvdump "$s" -q -o "$tmp/f.out" 2>/dev/null || continue # a seed for other checks
    $tq decode-kvdump - -q -o "$tmp/p.out" <"$s" || fail "$s: from a pipe"
    cmp -s "$tmp/f.out" "$tmp/p.out" || fail "$s: the bytes differ"
done

behaviour a_pipe_decode_holds_a_window_not_the_snapshot
./build/tests/kv-state "$tmp/big.ggsn" 12000 8 || fail "kv-state"
$tq encode-kvdump "$tmp/big.ggsn" --preset lossless -q -o "$tmp/big.tqkv" || fail "encode"
rm -f "$tmp/big.ggsn"
size=$(wc -c <"$tmp/big.tqkv")
cat "$tmp/big.tqkv" | /usr/bin/time -f "%M" -o "$tmp/rss" $tq decode-kvdump - -q -o "$tmp/big.out" ||
    fail "decode"
rss=$(tail -n 1 "$tmp/rss")
# the decoder's window: 16 chunks of 4 MB and their output (tqkv_stream.c, kv_snapshot_decode.c)
[ "$rss" -lt 160000 ] || fail "peak RSS $rss KiB for a $size-byte snapshot from a pipe"
rm -f "$tmp/big.tqkv" "$tmp/big.out"

behaviour a_bad_pipe_is_one_line_and_leaves_nothing
# copies of stdin go to a TMPDIR of this test's own: another process's copies are not ours
mkdir -p "$tmp/spool" || fail "mkdir"
TMPDIR=$tmp/spool
export TMPDIR
head -c 300000 "$tmp/s.tqkv" >"$tmp/cut.tqkv"
python3 -c "
import sys; b = bytearray(open(sys.argv[1], 'rb').read()); b[len(b) // 2] ^= 1
open(sys.argv[2], 'wb').write(b)" "$tmp/s.tqkv" "$tmp/flip.tqkv" || fail "python3"
{ cat "$tmp/s.tqkv"; echo more; } >"$tmp/long.tqkv"
for bad in cut flip long; do
    for cmd in "decode-kvdump - -o $tmp/x.out" "inspect -"; do
        # shellcheck disable=SC2086
        $tq $cmd <"$tmp/$bad.tqkv" >"$tmp/o" 2>"$tmp/e"
        rc=$?
        [ $rc -eq 1 ] || fail "$bad, $cmd: exit $rc"
        [ "$(wc -l <"$tmp/e")" -eq 1 ] || fail "$bad, $cmd: not one line: $(cat "$tmp/e")"
        [ -e "$tmp/x.out" ] && fail "$bad: an output was left"
    done
done
grep -q "truncated\|checksum\|after the trailer" "$tmp/e" || fail "the message: $(cat "$tmp/e")"
expect_err 1 "not a .tqkv snapshot" decode-kvdump - -o "$tmp/x.out" </dev/null
[ -e "$tmp/x.out" ] && fail "an output was left for an empty pipe"
echo "not a state" | $tq encode-kvdump - -o "$tmp/x.tqkv" 2>"$tmp/e"
[ $? -eq 1 ] && [ "$(wc -l <"$tmp/e")" -eq 1 ] || fail "encode of junk: $(cat "$tmp/e")"
[ -e "$tmp/x.tqkv" ] && fail "an output was left for junk"
[ -z "$(ls "$tmp/spool")" ] || fail "a copy of stdin was left in TMPDIR: $(ls "$tmp/spool")"

behaviour a_copy_of_stdin_killed_midway_leaves_nothing
# a state from a pipe is copied to TMPDIR nameless: SIGKILL (no handler runs) leaves no file
mkfifo "$tmp/fifo" || fail "mkfifo"
$tq encode-kvdump - -q -o "$tmp/k.tqkv" <"$tmp/fifo" 2>/dev/null &
pid=$!
exec 3>"$tmp/fifo"
cat "$tmp/8b.ggsn" >&3 # the copy is written; the pipe stays open: the encode waits for more
for _ in $(seq 100); do
    ls -l /proc/"$pid"/fd 2>/dev/null | grep -q "spool/tq-input" && break
    sleep 0.1
done
ls -l /proc/"$pid"/fd 2>/dev/null | grep -q "spool/tq-input.*(deleted)" ||
    fail "no nameless copy open: $(ls -l /proc/"$pid"/fd)"
kill -9 "$pid"
exec 3>&-
wait
[ -z "$(ls "$tmp/spool")" ] || fail "a killed copy left $(ls "$tmp/spool")"
[ -e "$tmp/k.tqkv" ] && fail "a killed encode left its output"

behaviour calibrate_reads_a_dump_from_a_pipe_as_from_its_file
# the scales from a pipe are those from the file; only the recorded source name differs
seed=tests/fuzz/seeds/fuzz_state_read/stories16.ggsq
cal="calibrate-innerq --method kv --head-dim 8 --min-tokens 1 --quiet"
$tq $cal "$seed" -o "$tmp/cal_file.gguf" || fail "calibrate from the file"
$tq $cal - -o "$tmp/cal_pipe.gguf" <"$seed" || fail "calibrate from a pipe"
# each scale tensor's name, count and statistics (offsets move with the name's length)
$tq inspect --quiet --stats "$tmp/cal_file.gguf" | awk '/innerq_/ {$6 = ""; $7 = ""; print}' >"$tmp/cal_file.txt"
$tq inspect --quiet --stats "$tmp/cal_pipe.gguf" | awk '/innerq_/ {$6 = ""; $7 = ""; print}' >"$tmp/cal_pipe.txt"
[ -s "$tmp/cal_file.txt" ] || fail "no description of the scales"
cmp -s "$tmp/cal_file.txt" "$tmp/cal_pipe.txt" ||
    fail "scales differ: $(diff "$tmp/cal_file.txt" "$tmp/cal_pipe.txt" | head -4)"
$tq inspect "$tmp/cal_pipe.gguf" | grep -q "sources = '-'" || fail "the pipe is not named '-'"

behaviour a_model_written_to_a_pipe_is_refused_without_a_file
# a GGUF is written in shards with its header last (one writer for every subcommand): - and
# s3:// are refused, no file named -
model=tests/fuzz/seeds/fuzz_gguf_read/tiny.gguf
mkdir -p "$tmp/cwd"
tq_at=$(realpath "$tq")
here=$PWD
for sub in quantize-tq4; do
    (cd "$tmp/cwd" && $tq_at $sub "$here/$model" - 2>"$tmp/e" >"$tmp/o")
    rc=$?
    [ $rc -eq 1 ] || fail "$sub to -: exit $rc (want 1)"
    [ "$(wc -l <"$tmp/e")" -eq 1 ] || fail "$sub to -: $(cat "$tmp/e")"
    grep -q "not to a pipe or an object" "$tmp/e" || fail "$sub to -: $(cat "$tmp/e")"
    [ -s "$tmp/o" ] && fail "$sub to - wrote to stdout"
    [ -e "$tmp/cwd/-" ] && fail "$sub left a file named -"
done
(cd "$tmp/cwd" && $tq_at $cal "$here/$seed" -o - 2>"$tmp/e")
[ $? -eq 1 ] && grep -q "not to a pipe" "$tmp/e" || fail "calibrate -o -: $(cat "$tmp/e")"
[ -e "$tmp/cwd/-" ] && fail "calibrate left a file named -"
expect_err 1 "not from a pipe or an object" quantize-tq4 - "$tmp/q.gguf" </dev/null
[ -e "$tmp/q.gguf" ] && fail "quantize from - left an output"

exit 0
