#!/bin/sh
# rotate-weights from the command line: deterministic per seed, provenance
# keys, norms folded to ones, usage errors; exactness and refusals are in
# tests/oracle/rotate_llama.py (llama.cpp is the judge there).
set -u
. tests/cli/common.inc
need_stories
behaviour the_output_follows_the_seed_not_the_thread_count
$tq rotate-weights -q "$M" "$tmp/a.gguf" || fail "rotate"
$tq rotate-weights -q --threads 1 "$M" "$tmp/b.gguf" || fail "rotate, one thread"
cmp -s "$tmp/a.gguf" "$tmp/b.gguf" || fail "the output depends on the thread count"
$tq rotate-weights -q --seed 7 "$M" "$tmp/c.gguf" || fail "rotate --seed"
cmp -s "$tmp/a.gguf" "$tmp/c.gguf" && fail "another seed gave the same model"
behaviour the_model_records_its_rotations_and_folds_its_norms
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
behaviour r1_off_is_recorded
$tq rotate-weights -q --r1 off "$M" "$tmp/r2.gguf" || fail "--r1 off"
$tq inspect "$tmp/r2.gguf" | grep -q "tq.rotation.r1 .*= 0" || fail "--r1 off recorded"
behaviour bad_options_and_inputs_are_one_line
expect_err 2 "nothing to do" rotate-weights --r1 off --r2 off "$M" "$tmp/x.gguf"
expect_err 2 "not on, off or auto" rotate-weights --r1 maybe "$M" "$tmp/x.gguf"
expect_err 2 "not auto, f16, bf16 or f32" rotate-weights --out-type q8_0 "$M" "$tmp/x.gguf"
expect_err 2 "where to?" rotate-weights "$M"
expect_err 1 "not a GGUF file" rotate-weights Makefile "$tmp/x.gguf"
cp "$M" "$tmp/m.gguf"
expect_err 1 "overwrite" rotate-weights "$tmp/m.gguf" "$tmp/m.gguf"
behaviour a_quantized_model_rotates_and_quantizes_again
# a quantized model in (as distributed): the rotated tensors come out in F16
# (or --out-type), the others are copied; then it quantizes again
$tq quantize-tq4 -q --policy all --boundary-layers 0 --tensor-type '.*=q8_0' "$M" "$tmp/q.gguf" || fail "quantize"
$tq rotate-weights -q --r1 off "$tmp/q.gguf" "$tmp/qr.gguf" || fail "rotate a q8_0 model"
$tq rotate-weights -q --out-type f32 --kind signs "$tmp/q.gguf" "$tmp/qs.gguf" || fail "rotate a q8_0 model, f32 out"
$tq inspect --json "$tmp/qr.gguf" >"$tmp/qr.json" && $tq inspect --json "$tmp/qs.gguf" >"$tmp/qs.json" || fail "inspect"
python3 - "$tmp/qr.json" "$tmp/qs.json" <<'PY' || fail "rotated q8_0 model"
import json, sys
r, s = (json.load(open(p)) for p in sys.argv[1:])
t = {x["name"]: x["type"] for x in r["tensors"]}
assert t["blk.0.attn_v.weight"] == "f16" and t["blk.0.attn_output.weight"] == "f16", t
assert t["blk.0.attn_q.weight"] == "q8_0" and t["blk.0.ffn_gate.weight"] == "q8_0", t   # R2 only: untouched
t = {x["name"]: x["type"] for x in s["tensors"]}
assert all(t[n] == "f32" for n in t if n.endswith("weight") and "norm" not in n), t   # R1 and R2: every matrix
k = {x["key"]: x.get("value") for x in s["metadata"]}
assert k["tq.rotation.r1.kind"] == "signs(64)" and k["tq.rotation.r2.kind"].startswith("signs(8)"), k
PY
$tq quantize-tq4 -q "$tmp/qr.gguf" "$tmp/qrq.gguf" || fail "quantize the rotated model"
exit 0
