#!/bin/sh
# Cells past a sliding window from the command line: with --model, the SWA cache's cells older
# than the model's window (tests/fuzz/seeds: a gemma3 session of 12 cells, one global and one
# sliding layer, and a model of no tensors with a window of 4) are planned and stored coarser,
# the rest one bit finer; --past-bits 0, a state without a model and the lossless preset leave
# every cell alike; a bad --past-bits is one line, exit 2, and nothing written.
set -u
. tests/cli/common.inc
st=tests/fuzz/seeds/fuzz_state_read/iswa12.ggsn
M=tests/fuzz/seeds/fuzz_gguf_read/gemma3-iswa-window4.gguf

behaviour sliding_layers_past_cells_are_planned_coarser
$tq encode-kvdump "$st" --model "$M" --dry-run >"$tmp/plan" || fail "dry run"
n=$(grep -c 'past(<8,b=2)' "$tmp/plan")
[ "$n" = 2 ] || fail "$n tensors with past(<8,b=2), not the sliding layer's K and V: $(cat "$tmp/plan")"
grep 'state 0 ' "$tmp/plan" | grep -q past && fail "a global layer has past cells: $(cat "$tmp/plan")"
grep -q 'K 5 / V 5 bits' "$tmp/plan" || fail "the rest not one bit finer: $(head -1 "$tmp/plan")"

behaviour past_cells_round_trip_to_a_state_of_the_same_size
$tq encode-kvdump "$st" --model "$M" -q -o "$tmp/x.tqkv" || fail "encode"
$tq inspect --json "$tmp/x.tqkv" >"$tmp/j" || fail "inspect"
n=$(grep -c '"past_end": 8, "past_bits": 2' "$tmp/j")
[ "$n" = 2 ] || fail "inspect shows $n tensors with past_end 8, not 2"
$tq decode-kvdump "$tmp/x.tqkv" -q -o "$tmp/back.ggsn" || fail "decode"
a=$(wc -c <"$st")
b=$(wc -c <"$tmp/back.ggsn")
[ "$a" = "$b" ] || fail "decoded $b bytes, the state has $a"

behaviour past_bits_0_no_model_or_lossless_code_every_cell_alike
for how in "--model $M --past-bits 0" "" "--model $M --preset lossless"; do
    # shellcheck disable=SC2086
    $tq encode-kvdump "$st" $how --dry-run >"$tmp/plan" || fail "dry run $how"
    grep -q 'past(' "$tmp/plan" && fail "past cells with '$how': $(cat "$tmp/plan")"
done

behaviour bad_past_bits_is_one_line_and_writes_nothing
expect_err 2 "--past-bits" encode-kvdump "$st" --model "$M" --past-bits 9 -o "$tmp/y.tqkv"
expect_err 2 "not with --preset lossless" encode-kvdump "$st" --model "$M" --past-bits 2 \
    --preset lossless -o "$tmp/y.tqkv"
[ -e "$tmp/y.tqkv" ] && fail "a refused encode wrote its output"
exit 0
