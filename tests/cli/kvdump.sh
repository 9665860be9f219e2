#!/bin/sh
# encode-kvdump / decode-kvdump from the command line: lossless snapshots of
# every fixture rebuild the identical file, lossy ones a loadable file of the
# same layout; outputs appear only when complete; bad input is one line.
set -u
. tests/cli/common.inc
F=${TQ_SHARED:-../shared}/fixtures/llama-state
M=${TQ_SHARED:-../shared}/models/stories260K.gguf
seed=tests/fuzz/seeds/fuzz_state_read/stories16.ggsq
python3 -c 'import numpy' 2>/dev/null || { echo "numpy not installed (the checks build and read .npy/.npz files)"; exit 77; }

behaviour lossless_seed_round_trips_through_files_and_pipes
# always available: the committed 16-token state (made with llama-cpp-python)
$tq encode-kvdump $seed -o "$tmp/s.tqkv" --preset lossless -q || fail "encode seed"
$tq decode-kvdump "$tmp/s.tqkv" -o - -q >"$tmp/s.out" || fail "decode to stdout"
cmp -s $seed "$tmp/s.out" || fail "lossless seed round trip differs"
$tq encode-kvdump $seed -o - --head-dim 8 -q | cat >"$tmp/p.tqkv" || fail "encode to a pipe"
$tq decode-kvdump "$tmp/p.tqkv" -o "$tmp/p.out" -q || fail "decode a piped snapshot"
[ "$(wc -c <"$tmp/p.out")" -eq "$(wc -c <$seed)" ] || fail "lossy rebuild has another size"
behaviour an_existing_output_is_replaced_whole_and_nothing_left_beside_it
# decode over a file that is there (exchanged with it, then the old one removed): the new
# bytes, another link to the old file keeps the old bytes, no temporary file stays
mkdir "$tmp/rep" && printf 'old state\n' >"$tmp/rep/s.out" && ln "$tmp/rep/s.out" "$tmp/rep/keep"
$tq decode-kvdump "$tmp/s.tqkv" -o "$tmp/rep/s.out" -q || fail "decode over an existing file"
cmp -s $seed "$tmp/rep/s.out" || fail "the replaced output is not the decoded state"
[ "$(cat "$tmp/rep/keep")" = "old state" ] || fail "the old file's other link changed: $(head -c 40 "$tmp/rep/keep")"
[ "$(ls "$tmp/rep" | wc -l)" -eq 2 ] || fail "files beside the output: $(ls "$tmp/rep")"
$tq decode-kvdump "$tmp/s.tqkv" -o "$tmp/rep/s.out" -q || fail "decode over its own output"
cmp -s $seed "$tmp/rep/s.out" || fail "the output decoded twice differs"
behaviour fsync_writes_the_same_snapshot_and_state
# --fsync (encode and decode) flushes before the rename and changes no byte
$tq encode-kvdump $seed -o "$tmp/f.tqkv" --head-dim 8 -q --fsync || fail "encode --fsync"
$tq encode-kvdump $seed -o "$tmp/n.tqkv" --head-dim 8 -q || fail "encode without --fsync"
cmp -s "$tmp/f.tqkv" "$tmp/n.tqkv" || fail "--fsync changed the snapshot"
$tq decode-kvdump "$tmp/f.tqkv" -o "$tmp/f.out" -q --fsync || fail "decode --fsync"
$tq decode-kvdump "$tmp/n.tqkv" -o "$tmp/n.out" -q || fail "decode without --fsync"
cmp -s "$tmp/f.out" "$tmp/n.out" || fail "--fsync changed the decoded state"
behaviour angle_and_prod_blocks_rebuild_close_values
# TurboAngle and TurboQuant-prod blocks (.tqkv version 3): a rebuild of the same
# size whose values are close to the source's; the record says which block
$tq decode-kvdump "$tmp/s.tqkv" -o "$tmp/s.npz" --format npz --head-dim 8 -q || fail "seed to npz"
for c in angle prod; do
    $tq encode-kvdump $seed -o "$tmp/$c.tqkv" --codec $c --head-dim 8 --k-bits 6 --v-bits 6 -q || fail "--codec $c"
    $tq decode-kvdump "$tmp/$c.tqkv" -o "$tmp/$c.out" -q || fail "decode --codec $c"
    [ "$(wc -c <"$tmp/$c.out")" -eq "$(wc -c <$seed)" ] || fail "$c rebuild has another size"
    $tq inspect --json "$tmp/$c.tqkv" | grep -q "\"codec\": \"$c\"" || fail "$c not recorded"
    $tq decode-kvdump "$tmp/$c.tqkv" -o "$tmp/$c.npz" --format npz --head-dim 8 -q || fail "$c to npz"
    python3 tests/tools/npz_close.py "$tmp/s.npz" "$tmp/$c.npz" 0.02 0 || fail "$c values"
done
expect_err 2 "not tq, turbo, angle or prod" encode-kvdump $seed -o "$tmp/z.tqkv" --codec zip
expect_err 2 "choose one" encode-kvdump $seed -o "$tmp/z.tqkv" --codec angle --turbo
expect_err 1 "needs 2..8 bits" encode-kvdump $seed -o "$tmp/z.tqkv" --codec prod --head-dim 8 --k-bits 1
[ -e "$tmp/z.tqkv" ] && fail "a refused encode left a file"

behaviour fixtures_round_trip_and_convert_to_the_forks_layouts
if [ -d "$F" ]; then
    for f in "$F"/*.ggs?; do
        $tq encode-kvdump "$f" -o "$tmp/x.tqkv" --preset lossless -q || fail "encode $f"
        $tq decode-kvdump "$tmp/x.tqkv" -o "$tmp/x.out" -q || fail "decode $f"
        cmp -s "$f" "$tmp/x.out" || fail "lossless round trip of $(basename "$f") differs"
    done
    # f16 state -> the fork's turbo3 cache layout: same size and headers as the fork's own
    # turbo3 state of the same prompt (the fork at 69d8e4be4, its tables); layer 0 K (no
    # attention before it) nearly byte-identical
    $tq encode-kvdump "$F/p1_f16.ggsq" -o "$tmp/l.tqkv" --preset lossless -q || fail "encode f16 seq"
    $tq decode-kvdump "$tmp/l.tqkv" -o "$tmp/t3.ggsq" --cache-type turbo3 --head-dim 8 \
        --fork-rev 69d8e4be4 -q || fail "to turbo3"
    python3 - "$tmp/t3.ggsq" "$F/p1_turbo3.ggsq" <<'PY' || fail "turbo3 conversion differs from the fork's layout"
import sys
a, b = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
meta = 4968 + 8 + 12 * 1239 + 8           # header..tokens, n_stream, cells, cell meta, v_trans, n_layer
assert len(a) == len(b) and a[:meta + 12] == b[:meta + 12], "layout or layer header differs"
k0a, k0b = a[meta + 12 : meta + 12 + 1239 * 200], b[meta + 12 : meta + 12 + 1239 * 200]
same = sum(x == y for x, y in zip(k0a, k0b)) / len(k0a)
assert same >= 0.99, same
PY
    $tq decode-kvdump "$tmp/l.tqkv" -o "$tmp/t3b.ggsq" --cache-type turbo3 2>"$tmp/e" && fail "turbo without a head size"
    grep -q "head size is needed" "$tmp/e" || fail "turbo head-size message: $(cat "$tmp/e")"
    $tq encode-kvdump "$F/p1_f16.ggsn" -o "$tmp/b.tqkv" --model "$M" 2>"$tmp/log" || fail "balanced"
    grep -q "preset balanced, K 5 / V 4 bits" "$tmp/log" || fail "report line: $(cat "$tmp/log")"
    $tq decode-kvdump "$tmp/b.tqkv" -o "$tmp/w.ggsn" --model tests/fuzz/seeds/fuzz_gguf_read/tiny.gguf 2>"$tmp/e"
    [ $? -eq 1 ] && grep -q "made for another model" "$tmp/e" || fail "wrong model not refused: $(cat "$tmp/e")"
    [ -e "$tmp/w.ggsn" ] && fail "output written despite the refusal"
    # session <-> sequence: the fixtures were saved by llama.cpp from the same prompt, so a
    # conversion must give llama.cpp's own other file, byte for byte
    $tq encode-kvdump "$F/p1_f16.ggsn" -o "$tmp/sn.tqkv" --preset lossless --model "$M" -q || fail "encode ggsn"
    $tq decode-kvdump "$tmp/sn.tqkv" --format ggsq -o "$tmp/sn.ggsq" -q || fail "--format ggsq"
    cmp -s "$tmp/sn.ggsq" "$F/p1_f16.ggsq" || fail "session -> sequence differs from llama.cpp's sequence file"
    $tq encode-kvdump "$F/p1_f16.ggsq" -o "$tmp/sq.tqkv" --preset lossless -q || fail "encode ggsq"
    $tq decode-kvdump "$tmp/sq.tqkv" --format ggsn -o "$tmp/sq.ggsn" 2>"$tmp/e" && fail "a session without an architecture"
    grep -q "give the model (--model)" "$tmp/e" || fail "architecture message: $(cat "$tmp/e")"
    $tq decode-kvdump "$tmp/sq.tqkv" --format ggsn --model "$M" -o "$tmp/sq.ggsn" 2>"$tmp/e" &&
        fail "fingerprint check skipped for a snapshot without one"
    $tq encode-kvdump "$F/p1_f16.ggsq" -o "$tmp/sq.tqkv" --preset lossless --model "$M" -q || fail "encode ggsq"
    $tq decode-kvdump "$tmp/sq.tqkv" --format ggsn --model "$M" -o "$tmp/sq.ggsn" -q || fail "--format ggsn"
    cmp -s "$tmp/sq.ggsn" "$F/p1_f16.ggsn" || fail "sequence -> session differs from llama.cpp's session file"
    # a token prefix: the layout of a 100-token state, rows equal to the full state's first 100
    $tq decode-kvdump "$tmp/sn.tqkv" --tokens 100 -o "$tmp/p100.ggsn" -q || fail "--tokens"
    python3 - "$tmp/p100.ggsn" "$F/p1_f16.ggsn" <<'PY' || fail "token prefix"
import struct, sys
def parse(b):
    n = struct.unpack_from("<I", b, 8)[0]; o = 12 + 4 * n
    al = struct.unpack_from("<I", b, o)[0]; o += 4 + al
    ns, cells = struct.unpack_from("<II", b, o); o += 8 + 12 * cells
    vt, nl = struct.unpack_from("<II", b, o); o += 8
    rows = []
    for _ in range(2 * nl):
        t, rs = struct.unpack_from("<iQ", b, o); o += 12
        rows.append(b[o:o + rs * cells]); o += rs * cells
    assert o == len(b)
    return n, b[12:12 + 4 * n], cells, rows, rs
a, b = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
na, ta, ca, ra, rs = parse(a)
nb, tb, cb, rb, _ = parse(b)
assert (na, ca) == (100, 100) and ta == tb[:400], (na, ca)
assert all(x == y[:100 * rs] for x, y in zip(ra, rb))
PY
    $tq encode-kvdump "$F/p1_f16_vtrans.ggsn" -o "$tmp/vt.tqkv" --preset lossless -q || fail "encode vtrans"
    $tq decode-kvdump "$tmp/vt.tqkv" --tokens 50 -o "$tmp/vt50.ggsn" -q || fail "--tokens on transposed V"
    $tq inspect "$tmp/vt50.ggsn" | grep -q '^tokens:        50$' || fail "transposed prefix"
    # npz out, one layer of a prefix, heads shaped by the model's head size
    $tq decode-kvdump "$tmp/sn.tqkv" --format npz --tokens 10 --layers 2-3 --model "$M" -o "$tmp/x.npz" -q ||
        fail "--format npz"
    python3 - "$tmp/x.npz" <<'PY' || fail "npz export"
import sys, numpy as np
z = np.load(sys.argv[1])
assert sorted(z.files) == ["k_2", "k_3", "tokens", "v_2", "v_3"], z.files
assert z["k_2"].shape == (10, 4, 8) and z["k_2"].dtype == np.float16 and z["tokens"].shape == (10,)
PY
else
    behaviour_now= # no ../shared: nothing was checked, nothing is reported
fi

behaviour append_onto_a_base_that_holds_every_cell
# --append (here the degenerate case: the base holds every cell already)
mkdir -p "$tmp/sub"
$tq encode-kvdump $seed -o "$tmp/sub/base.tqkv" --head-dim 8 -q || fail "base"
$tq encode-kvdump $seed -o "$tmp/sub/app.tqkv" --head-dim 8 --append "$tmp/sub/base.tqkv" -q || fail "append"
$tq decode-kvdump "$tmp/sub/app.tqkv" -o "$tmp/app.out" -q || fail "decode finds the base beside the snapshot"
$tq decode-kvdump "$tmp/sub/base.tqkv" -o "$tmp/base.out" -q || fail "decode base"
cmp -s "$tmp/app.out" "$tmp/base.out" || fail "append + base differs from the base alone"
mv "$tmp/sub/base.tqkv" "$tmp/moved.tqkv"
$tq decode-kvdump "$tmp/sub/app.tqkv" -o "$tmp/app2.out" 2>"$tmp/e" && fail "decoded without its base"
grep -q "cannot open" "$tmp/e" || fail "missing base message: $(cat "$tmp/e")"
$tq decode-kvdump "$tmp/sub/app.tqkv" -o "$tmp/app2.out" --base "$tmp/moved.tqkv" -q || fail "--base"
cmp -s "$tmp/app2.out" "$tmp/base.out" || fail "--base result differs"

behaviour innerq_scales_round_trip_and_misfits_are_refused
# InnerQ scales: x2 on every channel is exact in the codec, so it must decode to the same
# state as no scales; other scales round-trip, are recorded (snapshot version 2) and refused
# when they do not fit
python3 -c "
import numpy as np
np.save('$tmp/s2.npy', np.full(8, 2.0, np.float32))
np.save('$tmp/sv.npy', np.linspace(0.5, 2.0, 16, dtype=np.float32).reshape(2, 8))
np.save('$tmp/s16.npy', np.ones(16, np.float32))
np.save('$tmp/sneg.npy', -np.ones(8, np.float32))" || fail "numpy for the scale files"
$tq encode-kvdump $seed -o "$tmp/n.tqkv" --head-dim 8 --sink-cells 0 --planes off -q || fail "encode without scales"
$tq encode-kvdump $seed -o "$tmp/i2.tqkv" --head-dim 8 --innerq "$tmp/s2.npy" --sink-cells 0 --planes off -q || fail "--innerq x2"
$tq decode-kvdump "$tmp/n.tqkv" -o "$tmp/n.out" -q && $tq decode-kvdump "$tmp/i2.tqkv" -o "$tmp/i2.out" -q || fail "decode"
cmp -s "$tmp/n.out" "$tmp/i2.out" || fail "scales of 2 changed the decoded state"
$tq encode-kvdump $seed -o "$tmp/iv.tqkv" --head-dim 8 --innerq "$tmp/sv.npy" --sink-cells 0 --planes off -q || fail "--innerq [2, 8]"
$tq decode-kvdump "$tmp/iv.tqkv" -o "$tmp/iv.out" -q || fail "decode with scales"
[ "$(wc -c <"$tmp/iv.out")" -eq "$(wc -c <$seed)" ] || fail "scaled snapshot rebuilds another size"
$tq inspect --json "$tmp/iv.tqkv" | python3 -c "
import json, sys
d = json.load(sys.stdin)
assert d['version'] == 2 and all(t['innerq'] for t in d['tensors'] if t['codec'] == 'tq'), d['version']" ||
    fail "InnerQ not recorded"
$tq inspect --json "$tmp/n.tqkv" | grep -q '"version": 1,' || fail "a snapshot without scales is not version 1"
expect_err 1 "InnerQ scales of 16 channels for heads of 8" encode-kvdump $seed -o "$tmp/iq.tqkv" --head-dim 8 --innerq "$tmp/s16.npy"
expect_err 1 "not finite and positive" encode-kvdump $seed -o "$tmp/iq.tqkv" --head-dim 8 --innerq "$tmp/sneg.npy"
expect_err 2 "not with --preset lossless" encode-kvdump $seed -o "$tmp/iq.tqkv" --preset lossless --innerq "$tmp/s2.npy"
[ -e "$tmp/iq.tqkv" ] && fail "output after a refused --innerq"

behaviour dry_run_plans_what_the_encode_then_codes
# --dry-run: the plan and nothing else; an encode then codes every tensor as it said
$tq encode-kvdump $seed --head-dim 8 --k-bits 6 --boundary-layers 1 --dry-run --json -o "$tmp/dry.tqkv" >"$tmp/plan.json" ||
    fail "--dry-run"
[ -e "$tmp/dry.tqkv" ] && fail "--dry-run wrote a snapshot"
$tq encode-kvdump $seed --head-dim 8 --k-bits 6 --boundary-layers 1 --dry-run | grep -q "preset balanced, K 6 / V 4 bits" ||
    fail "--dry-run text"
$tq encode-kvdump $seed --head-dim 8 --k-bits 6 --boundary-layers 1 -o "$tmp/planned.tqkv" -q || fail "encode as planned"
$tq inspect --json "$tmp/planned.tqkv" >"$tmp/planned.json" || fail "inspect planned"
python3 - "$tmp/plan.json" "$tmp/planned.json" <<'PY' || fail "the snapshot differs from its plan"
import json, re, sys
plan, snap = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert len(plan["tensors"]) == len(snap["tensors"]) == 10
for p, t in zip(plan["tensors"], snap["tensors"]):
    m = re.fullmatch(r"tq\(g=(\d+),b=(\d+)(,nc)?\)(\+sink)?", p["codec"])
    assert m and (p["layer"], p["kv"]) == (t["layer"], t["kv"]) and t["codec"] == "tq", (p, t)
    assert m[4] and "sink_rows" in t, (p, t)  # K's and V's first cell kept
    assert (int(m[1]), int(m[2])) == (t["group"], t["bits"]), (p, t)
    assert t["bits"] == (8 if t["layer"] in (0, 4) else 6 if t["kv"] == "K" else 4), t
assert plan["payload_bytes"] < snap["size"], (plan["payload_bytes"], snap["size"])
PY

behaviour head_sizes_and_models_that_do_not_fit_are_refused
# a head size that does not cut the rows into whole heads, a model with other layers: refused, nothing written
expect_err 1 "rows of 32 values are not whole heads of 12 (--head-dim)" encode-kvdump $seed -o "$tmp/hd.tqkv" --head-dim 12
expect_err 1 "the state holds 5 layers, the model keeps K/V in 1" encode-kvdump $seed -o "$tmp/hd.tqkv" --model tests/fuzz/seeds/fuzz_gguf_read/tiny.gguf
[ -e "$tmp/hd.tqkv" ] && fail "output after a refused head size or model"

behaviour inspect_reads_states_and_snapshots
# inspect understands both
$tq inspect $seed >"$tmp/i" || fail "inspect state"
grep -q '^tokens:        16$' "$tmp/i" || fail "inspect state: tokens"
grep -q '16.000 bits per value' "$tmp/i" || fail "inspect state: bits per value"
$tq inspect --json "$tmp/p.tqkv" >"$tmp/j" || fail "inspect snapshot"
python3 - "$tmp/j" <<'PY' || fail "inspect --json of a snapshot"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["format"] == "tqkv" and d["verified"] and d["source"]["tokens"] == 16, d
assert len(d["tensors"]) == 10 and {t["codec"] for t in d["tensors"]} == {"tq"}
assert {(t["group"], t["bits"]) for t in d["tensors"] if t["kv"] == "K"} == {(8, 5)}
assert abs(d["bits_per_value"] - d["size"] * 8 / d["kv_values"]) < 1e-3
PY
$tq inspect --stats "$tmp/p.tqkv" 2>/dev/null && fail "--stats on a snapshot accepted"

head -c 5000 "$tmp/s.tqkv" >"$tmp/cut.tqkv"
expect_err 1 "cut.tqkv: trailer missing" decode-kvdump "$tmp/cut.tqkv" -o "$tmp/cut.out"
[ -e "$tmp/cut.out" ] && fail "partial output left behind"
ls "$tmp" | grep -q 'tmp\.' && fail "temporary file left behind"
cp "$tmp/s.tqkv" "$tmp/flip.tqkv"
printf 'Z' | dd of="$tmp/flip.tqkv" bs=1 seek=3000 conv=notrunc 2>/dev/null
expect_err 1 "checksum mismatch" decode-kvdump "$tmp/flip.tqkv" -o "$tmp/flip.out"
expect_err 1 "not a llama.cpp state file" encode-kvdump Makefile -o "$tmp/m.tqkv"
expect_err 1 "not a .tqkv snapshot" decode-kvdump Makefile -o "$tmp/m.out"
expect_err 1 "overwrite the input" encode-kvdump $seed -o $seed
expect_err 2 "unknown preset 'tiny'" encode-kvdump $seed -o "$tmp/t.tqkv" --preset tiny
expect_err 2 "where to?" encode-kvdump $seed
expect_err 2 "--k-bits: '9'" encode-kvdump $seed -o "$tmp/t.tqkv" --k-bits 9
expect_err 1 "head size is needed to rotate rows" decode-kvdump "$tmp/s.tqkv" -o "$tmp/q8.ggsq" \
    --cache-type q8_0
[ -e "$tmp/q8.ggsq" ] && fail "output written for a refused cache type"
expect_err 1 "cache type q5_K" decode-kvdump "$tmp/s.tqkv" -o "$tmp/q5.ggsq" --cache-type q5_K
[ -e "$tmp/q5.ggsq" ] && fail "output written for a refused cache type"
expect_err 2 "use it with --format npz" decode-kvdump "$tmp/s.tqkv" -o "$tmp/l.ggsq" --layers 1-2
expect_err 2 "not a layer range" decode-kvdump "$tmp/s.tqkv" -o "$tmp/l.npz" --format npz --layers 3-1
expect_err 2 "not ggsn, ggsq or npz" decode-kvdump "$tmp/s.tqkv" -o "$tmp/l.npz" --format safetensors
$tq decode-kvdump "$tmp/s.tqkv" -o "$tmp/f32.ggsq" --cache-type f32 -q || fail "--cache-type f32"
$tq inspect "$tmp/f32.ggsq" | grep -q '32.000 bits per value' || fail "f32 cache file"

behaviour attention_sink_cells_are_kept_exact
# attention sinks: the first cells of each tq-coded K and V are kept exact (version 3), later cells coded;
# the default keeps one, --sink-cells 0 none; an appended snapshot decodes its base's sink rows
$tq encode-kvdump $seed -o "$tmp/sk.tqkv" --head-dim 8 --sink-cells 4 -q || fail "--sink-cells 4"
$tq decode-kvdump "$tmp/sk.tqkv" -o "$tmp/sk.npz" --format npz --head-dim 8 -q || fail "decode sinks"
$tq inspect --json "$tmp/sk.tqkv" >"$tmp/sk.json" || fail "inspect sinks"
python3 - "$tmp/s.npz" "$tmp/sk.npz" "$tmp/sk.json" <<'PY' || fail "sink rows"
import json, sys, numpy as np
a, b, d = np.load(sys.argv[1]), np.load(sys.argv[2]), json.load(open(sys.argv[3]))
assert d["version"] == 3, d["version"]
assert all(t.get("sink_rows", 0) == 4 for t in d["tensors"]), d["tensors"][:2]
for k in a.files:
    if k == "tokens": continue
    assert np.array_equal(a[k][:4], b[k][:4]), (k, "first 4 cells not exact")
    assert not np.array_equal(a[k][4:], b[k][4:]), k
PY
$tq inspect --json "$tmp/p.tqkv" | grep -q '"sink_rows": 1' || fail "the default keeps one sink cell"
$tq encode-kvdump $seed -o "$tmp/s0.tqkv" --head-dim 8 --sink-cells 0 -q && ! $tq inspect --json "$tmp/s0.tqkv" | grep -q sink_rows ||
    fail "--sink-cells 0"
expect_err 2 "--sink-cells" encode-kvdump $seed -o "$tmp/z.tqkv" --sink-cells -1

behaviour k_offsets_lower_the_error_where_k_carries_a_mean
# K offsets: a dump whose K carries a per-channel mean (heads of 64) codes K minus its mean and adds it back;
# the error is lower than without; heads of 8 (the seed) and K without a mean get none
# (240 cells: fewer than twice the presets' 128 newest cells, so every cell is coded alike and
# these tests see the codec they name; the newest cells finer: tests/unit/test_tqkv_recent.c)
python3 - "$tmp" <<'PY'
import sys, numpy as np
rng = np.random.default_rng(3)
mean = rng.standard_normal(2 * 64).astype(np.float32) * 2
np.savez(f"{sys.argv[1]}/off.npz", **{f"{r}_{l}": (rng.standard_normal((240, 2, 64)).astype(np.float32)
         + (mean.reshape(2, 64) if r == "k" else 0)).astype(np.float16) for l in range(3) for r in "kv"})
PY
for ko in on off; do # on: the default (rope; without a model, the mean)
    $tq encode-kvdump "$tmp/off.npz" -o "$tmp/ko-$ko.tqkv" $([ $ko = off ] && echo --k-offset off) -q || fail "--k-offset $ko"
    $tq decode-kvdump "$tmp/ko-$ko.tqkv" -o "$tmp/ko-$ko.npz" -q || fail "decode --k-offset $ko"
    $tq inspect --json "$tmp/ko-$ko.tqkv" >"$tmp/ko-$ko.json" || fail "inspect --k-offset $ko"
done
python3 - "$tmp" <<'PY' || fail "K offsets"
import json, sys, numpy as np
d = sys.argv[1]
a, on, off = np.load(f"{d}/off.npz"), np.load(f"{d}/ko-on.npz"), np.load(f"{d}/ko-off.npz")
t_on, t_off = json.load(open(f"{d}/ko-on.json"))["tensors"], json.load(open(f"{d}/ko-off.json"))["tensors"]
assert all(t.get("offset", False) == (t["kv"] == "K") for t in t_on), t_on[:2]
assert not any(t.get("offset") for t in t_off)
err = lambda x, y: ((x.astype(np.float64) - y) ** 2).sum() / (x.astype(np.float64) ** 2).sum()
for k in a.files:
    e_on, e_off = err(a[k], on[k]), err(a[k], off[k])
    assert (e_on < 0.8 * e_off) if k.startswith("k") else e_on == e_off, (k, e_on, e_off)
PY
$tq inspect --json "$tmp/p.tqkv" | grep -q '"offset"' && fail "heads of 8 got K offsets"
behaviour planes_keep_the_decoded_bytes_in_a_smaller_file
# planes (3- and 5-bit blocks as norms, signs, magnitudes): the same decoded bytes, a smaller file; 4 bits: none
for pl in on off; do
    $tq encode-kvdump "$tmp/off.npz" --preset small --cells lloyd-max --planes $pl -q -o "$tmp/pl-$pl.tqkv" &&
        $tq decode-kvdump "$tmp/pl-$pl.tqkv" -q -o "$tmp/pl-$pl.npz" || fail "--planes $pl"
done
cmp -s "$tmp/pl-on.npz" "$tmp/pl-off.npz" || fail "planes changed the decoded values"
[ "$(stat -c %s "$tmp/pl-on.tqkv")" -lt "$(( $(stat -c %s "$tmp/pl-off.tqkv") * 97 / 100 ))" ] ||
    fail "planes saved under 3%: $(stat -c %s "$tmp/pl-on.tqkv") vs $(stat -c %s "$tmp/pl-off.tqkv")"
$tq inspect --json "$tmp/pl-on.tqkv" | grep -q '"planes": true' || fail "inspect does not show planes"
$tq inspect --json "$tmp/pl-off.tqkv" | grep -q '"planes"' && fail "--planes off stored planes"
$tq encode-kvdump "$tmp/off.npz" --k-bits 5 --v-bits 5 -q -o "$tmp/pl5.tqkv" && $tq inspect --json "$tmp/pl5.tqkv" | grep -q '"planes": true' ||
    fail "5-bit blocks without planes"
$tq inspect --json "$tmp/ko-on.tqkv" | grep -q '"planes"' && fail "4-bit blocks got planes"
expect_err 2 "--planes" encode-kvdump "$tmp/off.npz" -o "$tmp/z.tqkv" --planes maybe
behaviour a_transposed_v_in_3_and_5_bit_blocks_decodes
# planes are an extension a transposed V cannot carry: its 3- and 5-bit blocks are stored
# whole (every such snapshot failed to decode before)
if [ -f "$F/p1_f16_vtrans.ggsn" ]; then
    for sw in "--preset small" "--k-bits 5 --v-bits 5"; do
        # shellcheck disable=SC2086
        $tq encode-kvdump "$F/p1_f16_vtrans.ggsn" $sw -q -o "$tmp/vt3.tqkv" &&
            $tq decode-kvdump "$tmp/vt3.tqkv" -q -o "$tmp/vt3.ggsn" || fail "transposed V, $sw"
    done
else
    echo "SKIP: no ../shared fixtures (p1_f16_vtrans.ggsn)"
fi
behaviour uniform_cells_keep_the_error_in_a_smaller_file
# uniform cells: the Lloyd-Max codebook's error (within 3%) in a smaller file, recorded as such
for pr in balanced small; do
    $tq encode-kvdump "$tmp/off.npz" --preset $pr --cells uniform -q -o "$tmp/u-$pr.tqkv" &&
        $tq decode-kvdump "$tmp/u-$pr.tqkv" -q -o "$tmp/u-$pr.npz" &&
        $tq encode-kvdump "$tmp/off.npz" --preset $pr --cells lloyd-max -q -o "$tmp/lm-$pr.tqkv" &&
        $tq decode-kvdump "$tmp/lm-$pr.tqkv" -q -o "$tmp/lm-$pr.npz" || fail "--cells uniform, $pr"
    $tq inspect --json "$tmp/u-$pr.tqkv" | grep -q '"uniform": true' || fail "inspect does not show uniform cells"
    [ "$(stat -c %s "$tmp/u-$pr.tqkv")" -lt "$(stat -c %s "$tmp/lm-$pr.tqkv")" ] || fail "uniform cells made no smaller file ($pr)"
done
python3 - "$tmp" <<'PY' || fail "uniform cells' error"
import sys, numpy as np
d = sys.argv[1]
a = np.load(f"{d}/off.npz")
err = lambda x, y: ((x.astype(np.float64) - y) ** 2).sum() / (x.astype(np.float64) ** 2).sum()
for pr in ("balanced", "small"):
    u, lm = np.load(f"{d}/u-{pr}.npz"), np.load(f"{d}/lm-{pr}.npz")
    eu, el = np.mean([err(a[k], u[k]) for k in a.files]), np.mean([err(a[k], lm[k]) for k in a.files])
    assert abs(eu - el) < 0.03 * el, (pr, eu, el)
PY
expect_err 2 "--cells" encode-kvdump "$tmp/off.npz" -o "$tmp/z.tqkv" --cells round
behaviour auto_cells_pick_uniform_at_3_bits
# auto (the default): uniform cells at 3 bits (small), Lloyd-Max at 4 (balanced's K and V)
$tq encode-kvdump "$tmp/off.npz" --preset small -q -o "$tmp/auto-small.tqkv" && cmp -s "$tmp/auto-small.tqkv" "$tmp/u-small.tqkv" ||
    fail "the small preset does not default to uniform cells"
$tq inspect --json "$tmp/ko-on.tqkv" | python3 -c '
import json, sys
t = json.load(sys.stdin)["tensors"]
assert t and not any("uniform" in x for x in t), [(x["kv"], x["bits"], "uniform" in x) for x in t]
' || fail "balanced: K or V not Lloyd-Max at 4 bits"
$tq encode-kvdump $seed --head-dim 8 --preset small -q -o "$tmp/s8.tqkv" && ! $tq inspect --json "$tmp/s8.tqkv" | grep -q '"uniform"' ||
    fail "heads of 8 got uniform cells (measured worse there)"
behaviour append_onto_a_base_with_offsets_decodes_close
# --append on a base with offsets: the appended rows use the base's offsets and decode close to the source
$tq encode-kvdump "$tmp/off.npz" --preset lossless -q -o "$tmp/offl.tqkv" &&
    $tq decode-kvdump "$tmp/offl.tqkv" --tokens 200 -q -o "$tmp/off200.npz" || fail "a 200-token prefix"
$tq encode-kvdump "$tmp/off200.npz" -q -o "$tmp/offbase.tqkv" &&
    $tq encode-kvdump "$tmp/off.npz" --append "$tmp/offbase.tqkv" -q -o "$tmp/offapp.tqkv" &&
    $tq decode-kvdump "$tmp/offapp.tqkv" -q -o "$tmp/offapp.npz" || fail "--append with offsets"
python3 - "$tmp" <<'PY' || fail "appended rows with the base's offsets"
import sys, numpy as np
d = sys.argv[1]
a, b, full = np.load(f"{d}/off.npz"), np.load(f"{d}/offapp.npz"), np.load(f"{d}/ko-on.npz")
err = lambda x, y: ((x.astype(np.float64) - y) ** 2).sum() / (x.astype(np.float64) ** 2).sum()
for k in a.files:
    assert a[k].shape == b[k].shape, k
    assert err(a[k], b[k]) < 1.2 * err(a[k], full[k]) + 1e-9, (k, err(a[k], b[k]), err(a[k], full[k]))
PY
behaviour append_onto_a_uniform_base_takes_its_cells
# --append onto a small (uniform cells) base: the appended rows take the base's cells and decode as close
$tq encode-kvdump "$tmp/off200.npz" --preset small -q -o "$tmp/smallbase.tqkv" &&
    $tq encode-kvdump "$tmp/off.npz" --append "$tmp/smallbase.tqkv" -q -o "$tmp/smallapp.tqkv" &&
    $tq decode-kvdump "$tmp/smallapp.tqkv" -q -o "$tmp/smallapp.npz" || fail "--append onto uniform cells"
$tq inspect --json "$tmp/smallapp.tqkv" | grep -q '"uniform": true' || fail "the appended snapshot lost the base's cells"
python3 - "$tmp" <<'PY' || fail "appended rows with the base's uniform cells"
import sys, numpy as np
d = sys.argv[1]
a, b, full = np.load(f"{d}/off.npz"), np.load(f"{d}/smallapp.npz"), np.load(f"{d}/u-small.npz")
err = lambda x, y: ((x.astype(np.float64) - y) ** 2).sum() / (x.astype(np.float64) ** 2).sum()
for k in a.files:
    assert err(a[k], b[k]) < 1.2 * err(a[k], full[k]) + 1e-9, (k, err(a[k], b[k]), err(a[k], full[k]))
PY
behaviour device_choice_keeps_bytes_or_fails_cleanly
# --device: cpu is the default's bytes; cuda is either a GPU that writes the same bytes or one clear line and
# no file; the weight codecs have no CUDA kernels; an unknown device is a usage error
$tq encode-kvdump "$tmp/off.npz" --device cpu -q -o "$tmp/dcpu.tqkv" && cmp -s "$tmp/dcpu.tqkv" "$tmp/ko-on.tqkv" ||
    fail "--device cpu changed the snapshot"
if $tq encode-kvdump "$tmp/off.npz" --device cuda -q -o "$tmp/dgpu.tqkv" 2>"$tmp/dgpu.err"; then
    cmp -s "$tmp/dgpu.tqkv" "$tmp/ko-on.tqkv" || fail "the GPU's snapshot differs from the CPU's"
else
    grep -q "^tq encode-kvdump: --device cuda: \(no CUDA device is visible\|this tq was built without CUDA\)" "$tmp/dgpu.err" ||
        fail "--device cuda without a GPU: $(cat "$tmp/dgpu.err")"
    [ -e "$tmp/dgpu.tqkv" ] && fail "--device cuda without a GPU left a file"
    expect_err 1 "--device cuda: " decode-kvdump "$tmp/dcpu.tqkv" --device cuda -o "$tmp/dgpu.npz"
    [ -e "$tmp/dgpu.npz" ] && fail "decode --device cuda without a GPU left a file"
fi
expect_err 1 "no CUDA kernels for this work yet" quantize-tq4 "$tmp/none.gguf" "$tmp/q.gguf" --device cuda
expect_err 2 "--device: 'gpu' is not auto, cpu or cuda" encode-kvdump "$tmp/off.npz" -o "$tmp/z.tqkv" --device gpu
exit 0
