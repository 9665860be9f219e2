#!/bin/sh
# quantize-tq4 from the command line: plans, dry runs, reports; refusals
# (not GGUF, requantizing without leave, output = input, disk full) are one
# line, exit 1, and leave no output or temporary file behind.
set -u
. tests/cli/common.inc
need_stories
no_leftovers() { ls "$tmp" | grep -q '\.tmp\.' && fail "temporary file left behind: $(ls "$tmp")"; return 0; }

behaviour config_i_converts_the_middle_layer_and_keeps_the_ends
# config-i: layers 0,1,3,4 in q8_0 (2 at each end of 5), layer 2 in tq4_1s, ffn_down
# falls back to f16 (rows of 172), embeddings, output and norms kept
$tq quantize-tq4 "$M" "$tmp/c.gguf" 2>"$tmp/log" || fail "config-i"
grep -q '^\[  22/  48\] blk.2.attn_q.weight .* converting to tq4_1s' "$tmp/log" || fail "log line: $(sed -n 22p "$tmp/log")"
grep -q 'blk.0.ffn_down.weight .*fallback' "$tmp/log" || fail "fallback not logged"
grep -q '^tensors     = 35 converted, 13 kept, 5 fallbacks' "$tmp/log" || fail "summary: $(tail -4 "$tmp/log")"
$tq inspect --json "$tmp/c.gguf" >"$tmp/j" || fail "inspect"
python3 - "$tmp/j" <<'PY' || fail "config-i types"
import json, sys
d = json.load(open(sys.argv[1]))
t = {x["name"]: x["type"] for x in d["tensors"]}
assert t["blk.2.attn_q.weight"] == "tq4_1s" and t["blk.2.ffn_up.weight"] == "tq4_1s", t
assert t["blk.0.attn_q.weight"] == "q8_0" and t["blk.4.ffn_gate.weight"] == "q8_0"
assert t["blk.2.ffn_down.weight"] == "f16" and t["token_embd.weight"] == "f32" and t["output.weight"] == "f32"
k = {x["key"]: x.get("value") for x in d["metadata"]}
assert k["general.file_type"] == 44 and k["general.quantization_version"] == 2 and k["tq.quantize.policy"] == "config-i"
assert k["tq.quantize.counts"] == ["tq4_1s=6", "q8_0=24", "f16=5", "kept=13"], k["tq.quantize.counts"]
PY
behaviour the_first_matching_rule_wins
# rules: the command line and a file, the first match wins
printf '# attention in tq3_1s\nattn_(q|k)=tq3_1s\n\nblk\\.[0-9]+\\.ffn=keep\n' >"$tmp/rules"
$tq quantize-tq4 --policy attn --tensor-type 'blk\.1\.attn_k=q4_0' --tensor-type-file "$tmp/rules" --json "$M" "$tmp/r.gguf" \
    >"$tmp/r.json" || fail "rules"
python3 - "$tmp/r.json" <<'PY' || fail "rule results"
import json, sys
d = json.load(open(sys.argv[1]))
t = {x["name"]: x["to"] for x in d["tensors"]}
assert t["blk.0.attn_q.weight"] == "tq3_1s" and t["blk.1.attn_k.weight"] == "q4_0" and t["blk.1.attn_v.weight"] == "tq4_1s", t
assert t["blk.0.ffn_up.weight"] == "f32" and d["summary"]["converted"] == 20, d["summary"]
assert all(0 < x["rel_error"] < 0.05 for x in d["tensors"] if x["from"] != x["to"])
PY
behaviour a_dry_run_writes_nothing
# dry run: the plan, nothing written
$tq quantize-tq4 --dry-run --policy all "$M" "$tmp/d.gguf" 2>"$tmp/log" || fail "dry run"
[ -e "$tmp/d.gguf" ] && fail "dry run wrote a file"
grep -q 'would convert to tq4_1s' "$tmp/log" || fail "dry-run plan"
behaviour requantizing_needs_allow_requantize
# requantizing: a q4_0 model in, refused unless allowed
$tq quantize-tq4 --policy all --tensor-type '.*=q4_0' -q "$M" "$tmp/q4.gguf" || fail "q4_0 model"
expect_err 1 "pass --allow-requantize" quantize-tq4 "$tmp/q4.gguf" "$tmp/x.gguf"
[ -e "$tmp/x.gguf" ] && fail "output written despite the refusal"
$tq quantize-tq4 --allow-requantize -q "$tmp/q4.gguf" "$tmp/x.gguf" || fail "--allow-requantize"
behaviour bad_inputs_and_usage_are_one_line
expect_err 1 "not a GGUF file" quantize-tq4 Makefile "$tmp/y.gguf"
cp "$M" "$tmp/m.gguf"
expect_err 1 "overwrite" quantize-tq4 "$tmp/m.gguf" "$tmp/m.gguf"
cmp -s "$M" "$tmp/m.gguf" || fail "the input was touched"
expect_err 2 "not tq4_1s or tq3_1s" quantize-tq4 --type q4_k "$M" "$tmp/y.gguf"
expect_err 2 "not all, attn or config-i" quantize-tq4 --policy most "$M" "$tmp/y.gguf"
expect_err 2 "bad regular expression" quantize-tq4 --tensor-type '(=q8_0' "$M" "$tmp/y.gguf"
expect_err 2 "unknown type 'q9'" quantize-tq4 --tensor-type 'x=q9' "$M" "$tmp/y.gguf"
expect_err 2 "where to?" quantize-tq4 "$M"
expect_err 1 "imatrix" quantize-tq4 --imatrix Makefile "$M" "$tmp/y.gguf"
behaviour a_full_disk_leaves_nothing
# disk full: a 64 KiB file-size limit makes the writes fail part way
(ulimit -f 64; trap '' XFSZ; exec $tq quantize-tq4 --policy all "$M" "$tmp/full.gguf") >"$tmp/o" 2>"$tmp/e"
[ $? -eq 1 ] || fail "disk full: exit $?: $(cat "$tmp/e")"
grep -q "full.gguf:" "$tmp/e" || fail "disk full message: $(cat "$tmp/e")"
[ -e "$tmp/full.gguf" ] && fail "partial output after a write error"
no_leftovers
behaviour nan_weights_are_refused_by_name
# a NaN among the weights of a tensor going to q8_0: one line naming the value, exit 1, no output
cp "$M" "$tmp/nan.gguf"
$tq inspect --json "$M" >"$tmp/nan.json" || fail "inspect"
python3 - "$tmp/nan.json" "$tmp/nan.gguf" <<'PY' || fail "writing a NaN"
import json, struct, sys
t = next(x for x in json.load(open(sys.argv[1]))["tensors"] if x["name"] == "blk.0.attn_q.weight")
with open(sys.argv[2], "r+b") as f:
    f.seek(t["file_offset"] + 4 * 70)
    f.write(struct.pack("<f", float("nan")))
PY
expect_err 1 "blk.0.attn_q.weight: value 6 is nan: q8_0 blocks need finite values" \
    quantize-tq4 -q "$tmp/nan.gguf" "$tmp/nan-out.gguf"
[ -e "$tmp/nan-out.gguf" ] && fail "output written for a model with a NaN weight"
no_leftovers
exit 0
