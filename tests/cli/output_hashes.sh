#!/bin/sh
# Outputs that must not change by a byte: snapshots (every preset, --turbo,
# --append, --innerq) and what they decode to, quantize-tq4 (config-i, all,
# --imatrix, --simulate), rotate-weights and inspect, on the fixtures.  The
# expected hashes in output_hashes.sha256 were recorded with the code before the
# seams redesign (commit 878295a); the lossy tq snapshots and what they decode
# to were recorded again when --sink-cells 1 became the default (their first K
# cell is kept exact; lossless, --turbo, quantize-tq4, rotate-weights and
# inspect of models kept their hashes), and the snapshots again when the
# version 3 tensor extension (sink rows, K offsets) took its final layout
# (every decoded output kept its hash), and the snapshots once more when 3- and
# 5-bit blocks came to be stored as planes (decoded outputs again unchanged;
# uniform cells, the small preset's default for heads of 64 or more, do not
# reach these fixtures' heads of 8); transform coding (issue 22) became the
# default where it pays: the tq-codec lines name --transform off and kept
# their hashes, snap-klt-* and what they decode to were added; inspect's snapshot
# tables when the codec column came to fit its longest description (spacing only); the lossy
# snapshots, what they decode to and their inspect tables when V's first cell came to be kept
# exact like K's, balanced's V went to 3 bits and transform-coded chunks of 1024 rows or more to
# rANS streams (issue 29; lossless, --turbo, quantize-tq4, rotate-weights kept their hashes);
# the transform-coded snapshots and what they decode to again when the step search became regula
# falsi, KLT chunks alike in size, bases a byte a value and V's transform rows at unit norm;
# snap-npy (heads of 128) when balanced's V came to be transform-coded at unit norm above heads
# of 32 (issue 36; every other line, old-*.out among them, kept its hash);
# the lossy snapshots of 256 cells or more, what they decode to and their inspect tables when
# balanced and small came to code a layer's newest 128 cells 2 bits finer (issue 36; lossless,
# q8, --turbo, old-*.out, quantize-tq4 and rotate-weights kept their hashes);
# the snapshots' inspect tables when they came to show the bytes kept exactly (issue 37: a
# line added; every snapshot and decoded output kept its hash);
# the transform-coded snapshots and their inspect tables when their chunks came to grow from
# 1,024 rows (issue 38: a token prefix read from an object fetches few bytes; every decoded
# output kept its hash);
# snap-append, what it decodes to and its inspect tables when a link came to take its base's
# tables (scales, offsets, transform bases) by reference and to hold its short chunks' indices
# as bytes for zstd (issue 54: every other line kept its hash);
# `RECORD=1 sh tests/cli/output_hashes.sh`
# prints the table for the code as it is.  Snapshot bytes depend on the zstd
# build too: recorded with Debian 12's libzstd 1.5.4.
set -u
. tests/cli/common.inc
S=${TQ_SHARED:-../shared}
F=$S/fixtures/llama-state
M=$S/models/stories260K.gguf
want=tests/cli/output_hashes.sha256
[ -f "$M" ] && [ -d "$F" ] || { echo "no fixtures in $S"; exit 77; }
command -v python3 >/dev/null || { echo "python3 needed to build the inputs"; exit 77; }
o=$tmp/out; mkdir -p "$o"

# Inputs (standard library only): a NumPy dump with heads of 128 so --turbo codes
# something, InnerQ scales, and a legacy imatrix for stories260K.
python3 - "$tmp" <<'PY' || fail "building inputs"
import struct, sys
d = sys.argv[1]
def npy(path, shape, vals):
    hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % "".join(f"{n}, " for n in shape)
    hdr += " " * (-(10 + len(hdr) + 1) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
        f.write(struct.pack(f"<{len(vals)}f", *vals))
x, vals = 12345, []
for i in range(2 * 2 * 40 * 2 * 128):                      # [layers, K/V, tokens, heads, dim]
    x = (x * 1103515245 + 12345) % 2**31
    vals.append((x / 2**31 - 0.5) * (1 + (i % 128) / 16))
npy(f"{d}/dump.npy", (2, 2, 40, 2, 128), vals)
npy(f"{d}/scales.npy", (2, 8), [0.5 + 0.1 * i for i in range(16)])
ents = []
for l in range(5):
    for t, n in (("attn_q", 64), ("ffn_up", 64), ("ffn_down", 172)):
        name = f"blk.{l}.{t}.weight".encode()
        v = [1.0 + ((j * 7 + l) % 13) * (4.0 if j % 5 == 0 else 0.25) for j in range(n)]
        ents.append(struct.pack("<i", len(name)) + name + struct.pack("<ii", 10, n) + struct.pack(f"<{n}f", *v))
open(f"{d}/imatrix.dat", "wb").write(struct.pack("<i", len(ents)) + b"".join(ents))
PY

run() { name=$1; shift; "$tq" "$@" -q 2>"$tmp/e" >"$o/$name.stdout" || fail "$name: $* : $(cat "$tmp/e")"; }
for p in lossless q8 balanced small; do
    run snap-$p encode-kvdump "$F/p1_f16.ggsn" -o "$o/snap-$p.tqkv" --preset $p --model "$M" \
        --transform off
    run dec-$p decode-kvdump "$o/snap-$p.tqkv" -o "$o/dec-$p.ggsn"
done
# transform coding (codec 6), the presets' default where it pays: stories260K's K
for p in balanced small; do
    run snap-klt-$p encode-kvdump "$F/p1_f16.ggsn" -o "$o/snap-klt-$p.tqkv" --preset $p --model "$M"
    run dec-klt-$p decode-kvdump "$o/snap-klt-$p.tqkv" -o "$o/dec-klt-$p.ggsn"
done
run snap-seq encode-kvdump "$F/p1_f32.ggsq" -o "$o/snap-seq.tqkv" --k-bits 6 --v-bits 3 --boundary-layers 1 --head-dim 8 \
    --transform off
run dec-seq-t3 decode-kvdump "$o/snap-seq.tqkv" -o "$o/dec-seq-t3.ggsq" --cache-type turbo3 --head-dim 8 \
    --fork-rev 69d8e4be4
run dec-seq-t4 decode-kvdump "$o/snap-seq.tqkv" -o "$o/dec-seq-t4.ggsq" --cache-type turbo4 --head-dim 8
run snap-npy encode-kvdump "$tmp/dump.npy" -o "$o/snap-npy.tqkv"
run snap-turbo encode-kvdump "$tmp/dump.npy" -o "$o/snap-turbo.tqkv" --turbo --k-bits 4 --v-bits 3
run dec-turbo decode-kvdump "$o/snap-turbo.tqkv" -o "$o/dec-turbo.npz" --format npz
run snap-innerq encode-kvdump "$F/p1_f16.ggsn" -o "$o/snap-innerq.tqkv" --model "$M" --innerq "$tmp/scales.npy" \
    --transform off
run dec-innerq decode-kvdump "$o/snap-innerq.tqkv" -o "$o/dec-innerq.ggsn"
run prefix decode-kvdump "$o/snap-lossless.tqkv" -o "$o/prefix.ggsn" --tokens 600
(cd "$o" && "$OLDPWD/$tq" encode-kvdump prefix.ggsn -o base.tqkv --model "$OLDPWD/$M" -q --transform off &&
    "$OLDPWD/$tq" encode-kvdump "$OLDPWD/$F/p1_f16.ggsn" -o snap-append.tqkv --model "$OLDPWD/$M" --append base.tqkv -q &&
    "$OLDPWD/$tq" decode-kvdump snap-append.tqkv -o dec-append.ggsn -q) 2>"$tmp/e" || fail "append: $(cat "$tmp/e")"
# snapshots an earlier build wrote (the fuzz seeds: fp16 bases, byte and rANS indices, past
# cells, iSWA, InnerQ) decode as they did: recorded where this build's decode of each matched
# the previous release's (de67c24) by cmp; v3-recent (the newest cells finer, extension flag bit
# 9) as its first build decoded it
for f in v3-klt v3-klt-rans balanced v3-past iswa_v3 innerq_v2 v3-recent; do
    run old-$f decode-kvdump "tests/fuzz/seeds/fuzz_tqkv_read/$f.tqkv" -o "$o/old-$f.out"
done
run q-config-i quantize-tq4 "$M" "$o/q-config-i.gguf"
run q-all quantize-tq4 --policy all --type tq3_1s "$M" "$o/q-all.gguf"
run q-imatrix quantize-tq4 --policy all --imatrix "$tmp/imatrix.dat" "$M" "$o/q-imatrix.gguf"
run q-simulate quantize-tq4 --simulate "$M" "$o/q-simulate.gguf"
run q-json quantize-tq4 --dry-run --json "$M" "$o/unused.gguf"
run rot rotate-weights "$M" "$o/rot.gguf"
run rot-r2 rotate-weights --r1 off --seed 7 "$M" "$o/rot-r2.gguf"
for f in q-config-i.gguf snap-balanced.tqkv snap-append.tqkv snap-klt-balanced.tqkv; do
    "$tq" inspect "$o/$f" >"$o/inspect-$f.txt" && "$tq" inspect --json "$o/$f" >"$o/inspect-$f.json" || fail "inspect $f"
done
"$tq" inspect "$F/p1_f16.ggsn" >"$o/inspect-state.txt" || fail "inspect state"
# inspect's text and the JSON report name this run's temporary paths, and the report its
# time: hash without them
for f in "$o"/inspect-* "$o"/q-json.stdout; do
    sed -e "s|$o/||g" -e 's/"seconds": [0-9.e+-]*/"seconds": T/' "$f" >"$f.x" && mv "$f.x" "$f"
done

# models name the tool that wrote them ("tq 0.1.0", tq.quantize.tool, tq.rotation.tool): the
# hashes were recorded at 0.1.0, and a later version's label (of the same length, so that no
# offset moves) is read as that one; every other byte is compared as it is
version=$("$tq" --version | sed -n 's/^tq \([0-9][0-9.]*\) .*/\1/p')
[ "${#version}" = 5 ] || fail "version $version: the label is no longer 5 characters"
for f in "$o"/*.gguf "$o"/inspect-*; do
    perl -pi -e "s/tq \Q$version\E/tq 0.1.0/g" "$f" || fail "relabelling $f"
done

# inspect's JSON was written by printf when the hashes were recorded and is written by jansson
# now: the same values, spelt otherwise in three ways (glibc's %g pads an exponent to a sign and
# two digits, jansson does not; jansson writes a negative zero as -0.0, %g as -0; a snapshot
# record's bits_per_value was %.4f, trailing zeros kept).  Those numbers are spelt back as
# recorded, outside strings; every other byte is compared as it is
for f in "$o"/inspect-*.json; do
    perl -pi -e '
        my $row = /^  \{"/;
        s{("bits_per_value": )?("(?:[^"\\]|\\.)*"|-?[0-9][0-9.]*(?:e[-+]?[0-9]+)?)}{
            my ($bpv, $n) = ($1, $2);
            my $str = substr($n, 0, 1) eq "\"" ? $n : undef;
            if (defined $str) { ($bpv // "") . $str }
            elsif (defined $bpv && $row) { $bpv . sprintf("%.4f", $n) }
            else {
                $n =~ s/^(-?[0-9]+)\.0$/$1/;
                $n =~ s/e([-+]?)([0-9]+)$/sprintf("e%s%02d", $1 eq "-" ? "-" : "+", $2)/e;
                ($bpv // "") . $n;
            }
        }ge' "$f" || fail "respelling $f"
done

# KEEP_OUT=DIR keeps a copy of the outputs there (to see what changed)
[ -n "${KEEP_OUT:-}" ] && cp -r "$o" "$KEEP_OUT"
(cd "$o" && find . -type f -size +0 | sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum) >"$tmp/got"
if [ "${RECORD:-0}" = 1 ]; then cat "$tmp/got"; exit 0; fi
diff "$want" "$tmp/got" >"$tmp/d" || fail "outputs changed:
$(cat "$tmp/d")"
