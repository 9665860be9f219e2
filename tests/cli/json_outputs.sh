#!/bin/sh
# Every --json output parses as JSON and gives back the names it was handed, whatever they
# hold: quotes, backslashes, control characters, a newline, bytes that are not UTF-8 (shown as
# U+FFFD).  Names reach the outputs as file paths and as a model's tensor and key names.
set -u
. tests/cli/common.inc
seed_state=tests/fuzz/seeds/fuzz_state_read/stories16.ggsq
seed_model=tests/fuzz/seeds/fuzz_gguf_read/tiny.gguf
# a directory whose name holds every kind of character a JSON writer must escape
weird=$(printf '%s/q"b\\\\t\tc\001n\nx\377y' "$tmp")
mkdir -p "$weird" || { echo "FAIL: setup: mkdir"; exit 1; }
# parse FILE [KEY=EXPECTED...]: the file is one JSON document; each top-level KEY holds EXPECTED
# (a path with its non-UTF-8 bytes read as U+FFFD)
parse() {
    python3 - "$@" <<'PY'
import json, os, sys
path = sys.argv[1]
try:
    doc = json.loads(open(path, "rb").read().decode("utf-8"))
except Exception as e:
    print(f"not JSON: {e}: {open(path, 'rb').read()[:200]!r}")
    sys.exit(1)
for kv in sys.argv[2:]:
    key, want = kv.split("=", 1)
    want = os.fsencode(want).decode("utf-8", "replace")
    got = doc
    for part in key.split("."):
        got = got[int(part)] if isinstance(got, list) else got.get(part)
    if got != want:
        print(f"{key}: got {got!r}, want {want!r}")
        sys.exit(1)
PY
}
check() { # NAME FILE KEY=EXPECTED...: parse, fail with python's line
    name=$1; shift
    why=$(parse "$@") || fail "$name: $why"
}

behaviour encode_dry_run_json_escapes_its_input_name
cp "$seed_state" "$weird/s.ggsq"
$tq encode-kvdump "$weird/s.ggsq" -o "$weird/s.tqkv" --dry-run --json >"$tmp/enc.json" ||
    fail "encode --dry-run --json"
check encode "$tmp/enc.json" "input=$weird/s.ggsq"

behaviour inspect_json_of_a_snapshot_escapes_its_name_and_base
$tq encode-kvdump "$weird/s.ggsq" -o "$weird/b.tqkv" -q || fail "encode"
$tq encode-kvdump "$weird/s.ggsq" -o "$weird/a.tqkv" --append "$weird/b.tqkv" -q ||
    fail "encode --append"
$tq inspect --json "$weird/a.tqkv" >"$tmp/snap.json" || fail "inspect --json of the snapshot"
check snapshot "$tmp/snap.json" "file=$weird/a.tqkv" "base=b.tqkv"

behaviour inspect_json_of_a_sealed_snapshot_escapes_its_name
head -c 32 /dev/urandom >"$tmp/k.key" && chmod 600 "$tmp/k.key"
$tq encode-kvdump "$weird/s.ggsq" -o "$weird/sealed.tqkv" --key-file "$tmp/k.key" -q ||
    fail "a sealed encode"
TQ_KEY_FILE= $tq inspect --json "$weird/sealed.tqkv" >"$tmp/sealed.json" ||
    fail "inspect --json of a sealed snapshot without its key"
check sealed "$tmp/sealed.json" "file=$weird/sealed.tqkv" "format=tqkv"

behaviour inspect_json_of_a_state_escapes_its_name
$tq inspect --json "$weird/s.ggsq" >"$tmp/state.json" || fail "inspect --json of the state"
check state "$tmp/state.json" "file=$weird/s.ggsq"

behaviour inspect_json_of_a_model_escapes_tensor_and_key_names
# the same model with a tensor and a key renamed in place (names of the same length)
python3 - "$seed_model" "$weird/m.gguf" <<'PY' || fail "renaming"
import sys
b = open(sys.argv[1], "rb").read()
assert b.count(b"t0.weight") == 1 and b.count(b"\x02\x00\x00\x00\x00\x00\x00\x00sa") == 1
b = b.replace(b"t0.weight", b't"\\\x01\n\xff\xc3\xa9t')
b = b.replace(b"\x02\x00\x00\x00\x00\x00\x00\x00sa", b'\x02\x00\x00\x00\x00\x00\x00\x00"\x1f')
open(sys.argv[2], "wb").write(b)
PY
$tq inspect --json "$weird/m.gguf" >"$tmp/model.json" || fail "inspect --json of the model"
check model "$tmp/model.json" "file=$weird/m.gguf" \
    "$(printf 'tensors.0.name=t"\\\001\n\377\303\251t')" "$(printf 'metadata.5.key="\037')"

behaviour quantize_json_escapes_its_names
$tq quantize-tq4 --dry-run --json "$weird/m.gguf" "$weird/q.gguf" >"$tmp/q.json" ||
    fail "quantize --dry-run --json"
check quantize "$tmp/q.json" "input=$weird/m.gguf" \
    "$(printf 'tensors.0.name=t"\\\001\n\377\303\251t')"
[ -e "$weird/q.gguf" ] && fail "a dry run wrote its output"

behaviour bench_json_is_json_for_every_form
$tq bench kv --quick --json >"$tmp/bkv.json" 2>/dev/null || fail "bench kv --json"
check "bench kv" "$tmp/bkv.json"
$tq bench weights --quick --json --values 65536 >"$tmp/bw.json" 2>/dev/null ||
    fail "bench weights --json"
check "bench weights" "$tmp/bw.json"

behaviour slot_ls_json_escapes_its_store_name
mkdir -p "$weird/store"
$tq slot ls "$weird/store" --json >"$tmp/ls.json" || fail "slot ls --json"
check "slot ls" "$tmp/ls.json"

exit 0
