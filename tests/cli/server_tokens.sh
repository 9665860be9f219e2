#!/bin/sh
# llama-server's slot files hold their tokens packed (LLAMA_STATE.md, "llama-server's packed
# tokens": -1, the version 1, the count, the tokens, the media count 0): tq reads the prompt's
# tokens out of the packing and writes it again, so a slot file round-trips byte for byte, a
# token prefix restores (the server refuses a cut packing), and a longer session appends to a
# shorter one's snapshot.
set -u
. tests/cli/common.inc
S=tests/fuzz/seeds/fuzz_state_read/stories16.ggsq
# packed: the sequence file with its token list packed as llama-server packs it
python3 - "$S" "$tmp/packed.ggsq" <<'PY' || fail "python3"
import struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack_from("<I", b, 8)[0]
toks = b[12:12 + 4 * n]
packed = struct.pack("<Iiii", n + 4, -1, 1, n) + toks + struct.pack("<I", 0)
open(sys.argv[2], "wb").write(b[:8] + packed + b[12 + 4 * n:])
PY
n=$(python3 -c "import struct; print(struct.unpack_from('<I', open('$S','rb').read(), 8)[0])")

behaviour inspect_counts_the_prompts_tokens_not_the_packing
$tq inspect "$tmp/packed.ggsq" | grep -q "^tokens: *$n$" ||
    fail "inspect: $($tq inspect "$tmp/packed.ggsq" | grep tokens)"

behaviour a_packed_slot_file_round_trips_byte_for_byte
for preset in lossless balanced; do
    $tq encode-kvdump "$tmp/packed.ggsq" --preset $preset -q -o "$tmp/p.tqkv" || fail "encode"
    $tq decode-kvdump "$tmp/p.tqkv" -q -o "$tmp/p.out" || fail "decode"
    [ $preset = lossless ] && { cmp -s "$tmp/p.out" "$tmp/packed.ggsq" || fail "bytes differ"; }
done

behaviour a_token_prefix_is_packed_again
$tq encode-kvdump "$tmp/packed.ggsq" --preset lossless -q -o "$tmp/p.tqkv" || fail "encode"
$tq decode-kvdump "$tmp/p.tqkv" --tokens 5 -q -o "$tmp/p5.ggsq" || fail "decode --tokens 5"
$tq encode-kvdump "$S" --preset lossless -q -o "$tmp/plain.tqkv" || fail "encode plain"
$tq decode-kvdump "$tmp/plain.tqkv" --tokens 5 -q -o "$tmp/plain5.ggsq" || fail "plain --tokens"
python3 - "$tmp/p5.ggsq" "$tmp/plain5.ggsq" <<'PY' || fail "the prefix's packing"
import struct, sys
p, q = (open(f, "rb").read() for f in sys.argv[1:])
n = struct.unpack_from("<I", q, 8)[0]
want = struct.pack("<Iiii", n + 4, -1, 1, n) + q[12:12 + 4 * n] + struct.pack("<I", 0)
got = p[8:8 + len(want)]
assert got == want, (got[:32], want[:32])
assert p[8 + len(want):] == q[12 + 4 * n:], "the cells differ from the plain file's prefix"
PY

behaviour a_longer_session_appends_to_a_shorter_ones_snapshot
$tq encode-kvdump "$tmp/p5.ggsq" --preset lossless -q -o "$tmp/base.tqkv" || fail "base"
$tq encode-kvdump "$tmp/packed.ggsq" --append "$tmp/base.tqkv" --preset lossless -q \
    -o "$tmp/tail.tqkv" 2>"$tmp/e" || fail "append: $(cat "$tmp/e")"
$tq decode-kvdump "$tmp/tail.tqkv" -q -o "$tmp/t.out" || fail "decode the appended one"
cmp -s "$tmp/t.out" "$tmp/packed.ggsq" || fail "the appended snapshot decodes otherwise"

exit 0
