#!/bin/sh
# tq inspect on GGUF files: the summary, JSON that parses, --stats, and one-line
# errors with the right exit status for bad input.
set -u
. tests/cli/common.inc
model=../shared/models/stories260K.gguf
[ -n "${TQ_SHARED:-}" ] && model=$TQ_SHARED/models/stories260K.gguf
seed=tests/fuzz/seeds/fuzz_gguf_read/tiny.gguf

behaviour gguf_summary_and_json_say_what_the_file_holds
$tq inspect $seed >"$tmp/out" 2>"$tmp/err" || fail "inspect tiny.gguf: $(cat "$tmp/err")"
grep -q '^architecture:  llama$' "$tmp/out" || fail "no architecture line"
grep -q 'sa  *\[STRING\] x2 = \[.x., .yz.\]' "$tmp/out" || fail "string array not shown: $(grep sa "$tmp/out")"
grep -q 't1.weight  *\[32, 2\]  *q8_0  *68 ' "$tmp/out" || fail "tensor row"
$tq inspect --json --stats $seed >"$tmp/j" 2>/dev/null || fail "--json --stats"
python3 - "$tmp/j" <<'PY' || fail "JSON content"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["format"] == "gguf" and d["version"] == 3
t = {x["name"]: x for x in d["tensors"]}
s = t["t0.weight"]["stats"]  # arange(8): min 0, max 7, rms sqrt(17.5)
assert s["min"] == 0 and s["max"] == 7 and abs(s["rms"] - 17.5 ** 0.5) < 1e-6, s
assert d["summary"]["parameters"] == 72
assert [m["key"] for m in d["metadata"]][:1] == ["general.architecture"]
PY

behaviour stories260k_counts_and_stats_at_any_thread_count
if [ -f "$model" ]; then
    $tq inspect "$model" >"$tmp/out" || fail "inspect stories260K"
    grep -q '^parameters:    292.8K (292800)$' "$tmp/out" || fail "parameter count"
    grep -q '^tensors:       48$' "$tmp/out" || fail "tensor count"
    $tq inspect --stats --threads 1 --json "$model" >"$tmp/a" 2>/dev/null
    $tq inspect --stats --threads 2 --json "$model" >"$tmp/b" 2>/dev/null
    cmp -s "$tmp/a" "$tmp/b" || fail "--stats depends on the thread count"
fi

behaviour bad_files_and_usage_are_one_line
expect_err 1 "not a GGUF file (magic '# tq'" inspect Makefile
expect_err 1 "cannot open: No such file" inspect "$tmp/none.gguf"
head -c 100 $seed >"$tmp/cut.gguf"
expect_err 1 "cut.gguf: " inspect "$tmp/cut.gguf"
head -c 300 $seed >"$tmp/cut2.gguf"
expect_err 1 "cut2.gguf: truncated" inspect "$tmp/cut2.gguf"
: >"$tmp/empty.gguf"
expect_err 1 "empty file" inspect "$tmp/empty.gguf"
expect_err 1 "not a regular file" inspect "$tmp"
expect_err 2 "which file" inspect
expect_err 2 "unknown option '--bogus'" inspect --bogus $seed
expect_err 2 "unknown revision 'x'" inspect --type-profile x $seed
# inspect asks the KV sources' probe: an empty zip is a NumPy matter, not a GGUF one
printf 'PK\005\006\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000' >"$tmp/empty.npz"
expect_err 1 "empty.npz: not a readable .npz" inspect "$tmp/empty.npz"
behaviour cut_k_quant_tensors_are_refused_by_every_reader
# K-quant tensors cut short or not whole superblocks: refused by every reader,
# one line, nothing written
kq=tests/fuzz/seeds/fuzz_gguf_read/kquants.gguf
head -c 1000 $kq >"$tmp/kcut.gguf"
expect_err 1 "'t.q6_k' data (224 bytes padded) runs past the end" inspect --stats "$tmp/kcut.gguf"
expect_err 1 "runs past the end" quantize-tq4 --allow-requantize --policy all "$tmp/kcut.gguf" "$tmp/kq.gguf"
expect_err 1 "runs past the end" rotate-weights "$tmp/kcut.gguf" "$tmp/kr.gguf"
[ -e "$tmp/kq.gguf" ] || [ -e "$tmp/kr.gguf" ] && fail "output after a refusal"
python3 - "$kq" "$tmp/kshape.gguf" <<'PY' || fail "make kshape.gguf"
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
at = b.index(b"t.q4_k") + 6 + 4          # name, then n_dims: ne0 follows
assert struct.unpack_from("<Q", b, at)[0] == 256
struct.pack_into("<QQ", b, at, 128, 2)   # 128 x 2: the same bytes, half superblocks
open(sys.argv[2], "wb").write(b)
PY
expect_err 1 "t.q4_k" inspect --stats "$tmp/kshape.gguf"
exit 0
