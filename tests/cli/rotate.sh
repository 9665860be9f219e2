#!/bin/sh
# rotate-weights from the command line: deterministic per seed, provenance
# keys, norms folded to ones, usage errors; exactness and refusals are in
# tests/oracle/rotate_llama.py (llama.cpp is the judge there).
set -u
. tests/cli/common.inc
M=${TQ_SHARED:-../shared}/models/stories260K.gguf
[ -f "$M" ] || { echo "stories260K.gguf not found"; exit 77; }
$tq rotate-weights -q "$M" "$tmp/a.gguf" || fail "rotate"
$tq rotate-weights -q --threads 1 "$M" "$tmp/b.gguf" || fail "rotate, one thread"
cmp -s "$tmp/a.gguf" "$tmp/b.gguf" || fail "the output depends on the thread count"
$tq rotate-weights -q --seed 7 "$M" "$tmp/c.gguf" || fail "rotate --seed"
cmp -s "$tmp/a.gguf" "$tmp/c.gguf" && fail "another seed gave the same model"
$tq inspect --json --stats "$tmp/a.gguf" >"$tmp/j" || fail "inspect"
python3 - "$tmp/j" <<'PY' || fail "rotated model contents"
import json, sys
d = json.load(open(sys.argv[1]))
k = {x["key"]: x.get("value") for x in d["metadata"]}
assert k["tq.rotation.r1"] == 1 and k["tq.rotation.r1.size"] == 64 and k["tq.rotation.r1.kind"] == "hadamard(64)", k
assert k["tq.rotation.r2"] == 1 and k["tq.rotation.r2.size"] == 8 and k["tq.rotation.r1.untied_output"] == 0
t = {x["name"]: x for x in d["tensors"]}
for n in ["output_norm.weight", "blk.0.attn_norm.weight", "blk.4.ffn_norm.weight"]:
    s = t[n]["stats"]
    assert s["min"] == s["max"] == 1.0, (n, s)   # folded into the readers
assert len(t) == 48
PY
$tq rotate-weights -q --r1 off "$M" "$tmp/r2.gguf" || fail "--r1 off"
$tq inspect "$tmp/r2.gguf" | grep -q "tq.rotation.r1 .*= 0" || fail "--r1 off recorded"
expect_err 2 "nothing to do" rotate-weights --r1 off --r2 off "$M" "$tmp/x.gguf"
expect_err 2 "not on or off" rotate-weights --r1 maybe "$M" "$tmp/x.gguf"
expect_err 2 "where to?" rotate-weights "$M"
expect_err 1 "not a GGUF file" rotate-weights Makefile "$tmp/x.gguf"
cp "$M" "$tmp/m.gguf"
expect_err 1 "overwrite" rotate-weights "$tmp/m.gguf" "$tmp/m.gguf"
$tq quantize-tq4 -q "$M" "$tmp/q.gguf" || fail "quantize"
expect_err 1 "rotate the F16/F32 model, then quantize" rotate-weights "$tmp/q.gguf" "$tmp/x.gguf"
[ -e "$tmp/x.gguf" ] && fail "output after a refusal"
exit 0
