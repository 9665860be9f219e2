#!/bin/sh
# calibrate-innerq from the command line: SCALES.gguf from a state file, a
# snapshot and a NumPy dump; inspect shows it; encode-kvdump --innerq keeps
# the scales in the snapshot (per layer, and per KV head in version 3) and
# decode removes them; --fold writes a model that says what was folded.  Bad
# input (mixed models, an empty dump, scales or snapshots of another model,
# files that are not models, folded models given again) is one line, exit
# 1 or 2, and nothing written.
set -u
. tests/cli/common.inc
S=${TQ_SHARED:-../shared}
F=$S/fixtures/llama-state
M=$S/models/stories260K.gguf
[ -f "$M" ] && [ -f "$F/p1_f16.ggsn" ] || { echo "$S not found (stories260K and its state fixtures)"; exit 77; }
python3 -c 'import numpy' 2>/dev/null || { echo "numpy not installed (the checks build and read .npz files)"; exit 77; }
st=$F/p1_f16.ggsn

behaviour usage_errors_open_nothing
# usage errors first: nothing opened
expect_err 2 "which KV dumps" calibrate-innerq --model "$M" -o "$tmp/s.gguf"
expect_err 2 "give -o" calibrate-innerq --model "$M" "$st"
expect_err 2 "needs the model" calibrate-innerq --method qk "$st" -o "$tmp/s.gguf"
expect_err 2 "needs the model" calibrate-innerq --fold "$tmp/f.gguf" "$st" -o "$tmp/s.gguf"
expect_err 2 "not RoPE-pair symmetric" calibrate-innerq --method fork --model "$M" "$st" -o "$tmp/s.gguf" --fold "$tmp/f.gguf"
expect_err 2 "as it is" calibrate-innerq --method fork --clamp 0.5,2 --model "$M" "$st" -o "$tmp/s.gguf"
expect_err 2 "--clamp" calibrate-innerq --clamp 2,1 --model "$M" "$st" -o "$tmp/s.gguf"
expect_err 2 "--strength" calibrate-innerq --strength 0 --model "$M" "$st" -o "$tmp/s.gguf"
expect_err 2 "not wo, kv or off" calibrate-innerq --v maybe --model "$M" "$st" -o "$tmp/s.gguf"
[ -e "$tmp/s.gguf" ] && fail "a usage error wrote the scales"

behaviour a_state_its_snapshot_and_its_dump_calibrate_alike
# a state file, the same state as a snapshot and as a NumPy dump: three sources
$tq encode-kvdump "$st" --preset lossless --model "$M" -q -o "$tmp/l.tqkv" || fail "lossless snapshot"
$tq decode-kvdump "$tmp/l.tqkv" --format npz --head-dim 8 -q -o "$tmp/l.npz" || fail "npz"
$tq calibrate-innerq --model "$M" "$st" -o "$tmp/one.gguf" -q || fail "calibrate on the state"
$tq calibrate-innerq --model "$M" "$st" "$tmp/l.tqkv" "$tmp/l.npz" -o "$tmp/s.gguf" 2>"$tmp/log" || fail "calibrate on three"
grep -q "from 3717 cells in 3 dumps; method qk" "$tmp/log" || fail "summary: $(cat "$tmp/log")"
$tq inspect "$tmp/s.gguf" >"$tmp/i" || fail "inspect scales"
grep -q "tq.innerq.method = 'qk'" "$tmp/i" && grep -q "tq.innerq.tokens = 3717" "$tmp/i" &&
    grep -q "blk.4.innerq_k" "$tmp/i" && grep -q "InnerQ scales: 5 layers x 1 vector x 8 channels, method qk, K only" "$tmp/i" &&
    grep -q "  layer   4: K 0" "$tmp/i" || fail "inspect: $(head -c 2000 "$tmp/i")"
$tq inspect --json "$tmp/s.gguf" | grep -q '"tq.innerq.rope_pairs"' || fail "inspect --json"
# the same statistics three times over give the same scales as the state once
python3 - "$tmp/one.gguf" "$tmp/s.gguf" <<'PY' || fail "three copies of one state changed the scales"
import sys
a, b = (open(p, "rb").read() for p in sys.argv[1:])
# the tensor data sits at the end; metadata (sources, tokens) differs
n = 5 * 8 * 4
assert a[-n:] == b[-n:], "scales differ"
PY

behaviour snapshots_keep_the_scales_and_decode_removes_them
# snapshots with the scales: per layer (version 2 or 3) and per KV head (version 3, flag bit 6)
$tq calibrate-innerq --model "$M" "$st" --per head -o "$tmp/h.gguf" -q || fail "--per head"
for sc in s h; do
    $tq encode-kvdump "$st" --model "$M" --innerq "$tmp/$sc.gguf" --sink-cells 0 --planes off --recent-cells 0 -q -o "$tmp/$sc.tqkv" || fail "encode --innerq $sc"
    $tq inspect --json "$tmp/$sc.tqkv" | grep -q '"innerq": true' || fail "$sc: scales not recorded"
    $tq decode-kvdump "$tmp/$sc.tqkv" -q -o "$tmp/$sc.ggsn" || fail "decode $sc"
    $tq decode-kvdump "$tmp/$sc.tqkv" --format npz --head-dim 8 -q -o "$tmp/$sc.npz" || fail "decode $sc to npz"
    # in the model's basis again (V at 3 bits: 0.02-0.03); scaled values would be far off
    python3 tests/tools/npz_close.py "$tmp/l.npz" "$tmp/$sc.npz" 0.05 ||
        fail "$sc: decode did not remove the scales"
done
$tq inspect "$tmp/h.tqkv" | grep -q "tqkv v3" || fail "per-head scales are version 3"
$tq inspect "$tmp/s.tqkv" | grep -q "tqkv v2" || fail "per-layer scales need no version 3"

behaviour fold_says_what_it_folded
# --fold: provenance, the K part through W_q/W_k rows
$tq calibrate-innerq --model "$M" "$st" -o "$tmp/s2.gguf" --fold "$tmp/f.gguf" --v wo 2>"$tmp/log" || fail "fold"
grep -q "K through W_q/W_k rows, V through W_v rows and W_o columns" "$tmp/log" || fail "fold log: $(cat "$tmp/log")"
$tq inspect "$tmp/f.gguf" | grep -q "tq.innerq.folded = 'k:wq_wk_rows,v:wv_rows_wo_columns'" || fail "fold provenance"

behaviour refusals_write_nothing
# refusals, nothing written
python3 - "$tmp" <<'PY'
import sys, numpy as np
d = sys.argv[1]
np.savez(f"{d}/empty.npz", k_0=np.zeros((0, 4, 8), np.float16), v_0=np.zeros((0, 4, 8), np.float16))
np.savez(f"{d}/other.npz", **{f"{r}_{l}": np.ones((100, 2, 16), np.float16) for l in range(5) for r in "kv"})
np.savez(f"{d}/short.npz", **{f"{r}_{l}": np.ones((100, 4, 8), np.float16) for l in range(3) for r in "kv"})
PY
expect_err 1 "dumps of different models" calibrate-innerq --model "$M" "$st" "$tmp/other.npz" -o "$tmp/x.gguf"
expect_err 1 "dumps of different models" calibrate-innerq --head-dim 8 "$st" "$tmp/other.npz" -o "$tmp/x.gguf"
expect_err 1 "dumps of another model" calibrate-innerq --model "$M" "$tmp/short.npz" -o "$tmp/x.gguf"
expect_err 1 "empty" calibrate-innerq --model "$M" "$tmp/empty.npz" -o "$tmp/x.gguf"
expect_err 1 "not a model" calibrate-innerq --model "$tmp/s.gguf" "$st" -o "$tmp/x.gguf"
expect_err 1 "folded in" calibrate-innerq --model "$tmp/f.gguf" "$st" -o "$tmp/x.gguf"
expect_err 1 "fewer than --min-tokens" calibrate-innerq --model "$M" "$st" --min-tokens 5000 -o "$tmp/x.gguf"
expect_err 1 "overwrite the input" calibrate-innerq --model "$M" "$tmp/l.npz" -o "$tmp/l.npz"
expect_err 1 "overwrite the input" calibrate-innerq --model "$M" "$st" -o "$tmp/x.gguf" --fold "$M"
expect_err 2 "the same file" calibrate-innerq --model "$M" "$st" -o "$tmp/x.gguf" --fold "$tmp/x.gguf"
[ -e "$tmp/x.gguf" ] && fail "a refusal wrote the scales"
$tq quantize-tq4 -q "$M" "$tmp/q.gguf" || fail "quantize"  # another fingerprint
expect_err 1 "another model" calibrate-innerq --model "$tmp/q.gguf" "$tmp/l.tqkv" -o "$tmp/x.gguf"
expect_err 1 "calibrated for another model" encode-kvdump "$st" --model "$tmp/q.gguf" --innerq "$tmp/s.gguf" -o "$tmp/x.tqkv"
expect_err 2 "need no --innerq" encode-kvdump "$st" --model "$tmp/f.gguf" --innerq "$tmp/s.gguf" -o "$tmp/x.tqkv"
expect_err 1 "scales for another model" encode-kvdump "$tmp/other.npz" --innerq "$tmp/s.gguf" -o "$tmp/x.tqkv"
expect_err 1 "not scales" encode-kvdump "$st" --innerq "$M" -o "$tmp/x.tqkv"
[ -e "$tmp/x.tqkv" ] && fail "a refusal wrote a snapshot"
exit 0
