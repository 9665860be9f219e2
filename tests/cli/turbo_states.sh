#!/bin/sh
# A turbo server's slots (issue 48): a state whose K/V are the fork's turbo blocks encodes with
# every preset (the plan keeps blocks where a transform cannot fit the few values such rows
# hold: never an error) and decodes to the same bytes with --preset lossless.
set -u
. tests/cli/common.inc
SEEDS=tests/fuzz/seeds/fuzz_state_read
$tq encode-kvdump $SEEDS/stories16.ggsq --head-dim 8 -q -o "$tmp/s.tqkv" || fail "encode"

behaviour a_turbo_state_encodes_with_every_preset
for type in turbo3 turbo4 turbo2; do
    $tq decode-kvdump "$tmp/s.tqkv" --cache-type $type --head-dim 8 -q -o "$tmp/$type.ggsq" ||
        fail "writing a $type state"
    for preset in balanced small q8 lossless; do
        for hd in "--head-dim 8" ""; do
            $tq encode-kvdump "$tmp/$type.ggsq" --preset $preset $hd -q -o "$tmp/t.tqkv" 2>"$tmp/e" ||
                fail "$type --preset $preset $hd: $(cat "$tmp/e")"
        done
    done
    $tq encode-kvdump "$tmp/$type.ggsq" --preset lossless -q -o "$tmp/l.tqkv" || fail "lossless"
    $tq decode-kvdump "$tmp/l.tqkv" -q -o "$tmp/back.ggsq" || fail "decode"
    cmp -s "$tmp/back.ggsq" "$tmp/$type.ggsq" || fail "$type: lossless is not byte-identical"
done
behaviour a_turbo3_servers_slot_encodes_with_every_preset
# the fork's own server's slot (../shared): its rows hold few values, which no transform fits
F=${TQ_SHARED:-../shared}/fixtures/llama-state/p1_turbo3.ggsq
if [ -f "$F" ]; then
    for preset in balanced small q8 lossless; do
        for hd in "--head-dim 8" ""; do
            $tq encode-kvdump "$F" --preset $preset $hd -q -o "$tmp/f.tqkv" 2>"$tmp/e" ||
                fail "p1_turbo3 --preset $preset $hd: $(cat "$tmp/e")"
        done
    done
else
    echo "  $F not found: the fork server's slot not tried"
fi
exit 0
