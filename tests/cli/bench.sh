#!/bin/sh
# tq bench kv on its built-in workload (--quick): the JSON holds every codec's
# figures, the theory table and the machine; the exact codebooks' D_mse are
# the published values (within 1%) and between the bounds; bits per value are
# the stored bytes over the values; the SVG parses as XML and rasterizes.
# Timing is reported by the bench, never asserted here.
set -u
. tests/cli/common.inc
behaviour the_quick_bench_reports_every_codec_as_the_field_does
$tq bench --quick --json --plot "$tmp/b.svg" >"$tmp/b.json" 2>"$tmp/err" || fail "bench --quick: $(cat "$tmp/err")"
python3 - "$tmp/b.json" "$tmp/b.svg" <<'PY' || fail "bench JSON/SVG content"
import json, math, sys, xml.etree.ElementTree as ET
d = json.load(open(sys.argv[1]))
assert {"cpu", "cores", "simd", "threads"} <= d["machine"].keys(), d["machine"]
names = [c["name"] for c in d["codecs"]]
for want in ["f16", "zstd -3 of f16", "q8_0", "q4_0", "q4_K", "q5_K", "q6_K", "turbo2", "turbo3", "turbo4",
             "tq b=2", "tq b=3", "tq b=4", "angle A=16 r=2", "prod b=3"]:
    assert want in names, (want, names)
for c in d["codecs"]:
    for k in ["name", "bits_per_value", "rel_mse", "cosine", "encode_gbps", "decode_gbps"]:
        assert k in c, (c["name"], k)
    assert c["heads"] > 0 and c["encode_gbps"] > 0 and c["decode_gbps"] > 0, c
    assert abs(c["bits_per_value"] / (8 * c["bytes"] / c["values"]) - 1) < 1e-5, c   # the file-size arithmetic
    assert 0 <= c["rel_mse"] < 1 and 0 < c["cosine"] <= 1 + 1e-9, c
by = {c["name"]: c for c in d["codecs"]}
assert by["f16"]["bits_per_value"] == 16 and by["q8_0"]["bits_per_value"] == 8.5 and by["q4_K"]["bits_per_value"] == 4.5
# tq on as many vectors of 64, 128 and 256: 4 bits a value and 16 bits of norm a vector
assert abs(by["tq b=4"]["bits_per_value"] - (4 + 16 * 3 / (64 + 128 + 256))) < 1e-5, by["tq b=4"]
assert by["f16"]["rel_mse"] < 1e-6 and by["tq b=2"]["rel_mse"] > by["tq b=3"]["rel_mse"] > by["tq b=4"]["rel_mse"]
target = {1: 0.3609, 2: 0.1160, 3: 0.0340, 4: 0.00931}
for t in d["theory"]:
    b = t["bits"]
    assert abs(t["dmse"] / target[b] - 1) < 0.01, t
    assert abs(t["lower"] / 4.0 ** -b - 1) < 1e-5 and abs(t["upper"] / (math.sqrt(3) * math.pi / 2 * 4.0 ** -b) - 1) < 1e-5, t
    assert t["lower"] < t["dmse"] < t["upper"] and abs(t["measured"] / t["dmse"] - 1) < 0.05, t
assert all(c["larql"] == "pass" for c in d["codecs"] if c["larql"] and c["family"] in ("tq", "turbo", "angle")), \
    [(c["name"], c["larql"]) for c in d["codecs"]]
for c in d["codecs"]:  # TurboQuant-prod: inner products within the paper's variance bound, no visible bias
    if c["family"] == "prod":
        assert c["ip_variance"] < c["ip_variance_bound"] and abs(c["ip_bias"]) < 4 * (c["ip_variance"] / 1000) ** 0.5, c
    if c["family"] in ("tq", "turbo", "angle", "prod"):
        assert c["scores_gbps"] > 0 and c["decode_dot_gbps"] > 0, c
assert len(d["pairs"]) >= 5 and d["angle_histogram_kl"]["rotated"] >= 0
root = ET.parse(sys.argv[2]).getroot()
assert root.tag.endswith("svg") and len(root) > 20
PY
behaviour the_plot_is_svg_that_rasterizes
if command -v rsvg-convert >/dev/null; then
    rsvg-convert -o "$tmp/b.png" "$tmp/b.svg" && [ -s "$tmp/b.png" ] || fail "rsvg-convert could not render the plot"
elif [ -n "${CI:-}" ]; then
    fail "rsvg-convert missing (apt-get install librsvg2-bin)"
else
    echo "note: rsvg-convert not installed, the plot was only parsed"
fi
behaviour model_alone_measures_its_own_weight_types
# --model alone: the weight types on the model's own tensors
M=${TQ_SHARED:-../shared}/models/stories260K.gguf
if [ -f "$M" ]; then
    $tq bench --quick --model "$M" --json >"$tmp/w.json" || fail "bench --model"
    python3 - "$tmp/w.json" <<'PY' || fail "bench --model content"
import json, sys
d = json.load(open(sys.argv[1]))
c = {x["name"]: x for x in d["codecs"]}
assert d["tensors"] > 0 and c["q8_0"]["bits_per_weight"] == 8.5 and c["tq4_1s (tq search)"]["bits_per_weight"] == 5
assert c["tq4_1s (tq search)"]["rel_error"] < c["tq4_1s (fork search)"]["rel_error"] < c["tq3_1s (tq search)"]["rel_error"], c
assert c["q6_K"]["rel_error"] is None   # stories260K's rows of 64 are not superblocks
PY
fi
behaviour bad_input_is_one_line_and_leaves_no_plot
# bad input: one line, exit status, no plot left
expect_err 1 "cannot open" bench --quick --kv "$tmp/none.ggsn"
expect_err 2 "kv or weights" bench sideways
exit 0
