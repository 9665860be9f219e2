#!/bin/sh
# The seams hold (HACKING.md, "Seams"): formats/ and cmd/ use
# libtq only through lib/tq.h; byte formats include neither formats/model/
# nor formats/snapshot/, and model/ not snapshot/; the KV sources do not know
# each other; encode-kvdump holds no InnerQ derivation; no function in
# lib/, formats/ or cmd/ runs over 80 lines, and no file there over 700.
set -u
. tests/cli/common.inc
behaviour lib_compiles_with_its_own_headers_alone
# libtq knows numbers, not files: every lib/ source compiles with -Ilib and nothing else
for f in lib/*.c; do
    ${CC:-cc} -std=gnu11 -fopenmp -fsyntax-only -Ilib "$f" 2>"${TMPDIR:-/tmp}/seams.$$" ||
        fail "$f needs more than -Ilib: $(head -3 "${TMPDIR:-/tmp}/seams.$$")"
done
rm -f "${TMPDIR:-/tmp}/seams.$$"
bad=$(grep -n '#include "' lib/*.[ch] lib/*.inc | while IFS= read -r line; do
    h=$(printf '%s\n' "$line" | sed -n 's/.*#include "\([^"]*\)".*/\1/p')
    [ -f "lib/$h" ] || printf '%s\n' "$line"
done)
[ -z "$bad" ] || fail "lib/ includes a header from outside lib/: $bad"

behaviour cmd_holds_no_policy_tables
# cmd/ parses, maps, calls and reports: the tables that decide (presets, file types, the
# store's entry names, the fork's revisions) live in formats/
bad=$(grep -n 'clang-format off\|"MOSTLY_\|"balanced", "lossless"\|"snap/\|"names/\|"points/\|"ckpt/' \
      cmd/*.c cmd/*.h)
[ -z "$bad" ] || fail "policy tables in cmd/: $bad"

behaviour the_preset_is_resolved_once
# the preset's row is read in kv_presets.c alone, and a request is resolved in one place
# (tq_kvsnap_prepare): the plan and its stages read its settings and never the preset again
bad=$(grep -n 'preset_row(\|presets\[' formats/*/*.[ch] cmd/*.[ch] |
      grep -v '^formats/snapshot/kv_presets\.c:')
[ -z "$bad" ] || fail "the preset's table read outside kv_presets.c: $bad"
bad=$(grep -ln 'tq_kvsnap_resolve(' formats/*/*.c cmd/*.c |
      grep -v '^formats/snapshot/kv_prepare\.c$\|^formats/snapshot/kv_presets\.c$')
[ -z "$bad" ] || fail "a request resolved outside tq_kvsnap_prepare: $bad"
n=$(grep -c 'tq_kvsnap_resolve(' formats/snapshot/kv_prepare.c)
[ "$n" = 1 ] || fail "kv_prepare.c resolves $n times, expected 1 (tq_kvsnap_prepare)"
bad=$(grep -n '[>.]preset\b' formats/snapshot/*.c | grep -v '^formats/snapshot/kv_presets\.c:')
[ -z "$bad" ] || fail "the preset read after resolution: $bad"

behaviour the_options_live_three_lives
# what the user asked (tq_kvsnap_request: plain values, set once where a front end maps its
# options), the plan that resolves it (plan->settings, each value once) and how it runs
# (tq_kvsnap_run) are kept apart
req=$(sed -n '/^typedef struct tq_kvsnap_request {/,/^} tq_kvsnap_request;/p' \
      formats/snapshot/kv_plan.h)
[ -n "$req" ] || fail "no tq_kvsnap_request in kv_plan.h"
bad=$(printf '%s\n' "$req" | grep -v '^ *\(/\*\|\*\)' |
      grep -E 'threads|zstd_level|on_progress|progress_user|tq_model|tqkv_reader|float \*')
[ -z "$bad" ] || fail "the request holds run fields or objects: $bad"
bad=$(grep -n 'tq_kvsnap_request \*' formats/*/*.[ch] cmd/*.c | grep -v 'const tq_kvsnap_request \*' |
      grep -v 'map_request(\|snapshot_request(')
[ -z "$bad" ] || fail "a request changed after mapping: $bad"
plan=$(sed -n '/^typedef struct tq_kvsnap_plan {/,/^} tq_kvsnap_plan;/p' formats/snapshot/kv_plan.h)
bad=$(printf '%s\n' "$plan" | grep -E '(int|double) +(k_bits|v_bits|k_rate|v_rate|past_bits)\b')
[ -z "$bad" ] || fail "the plan holds a resolved value besides its settings: $bad"
grep -q 'tq_kvsnap_options' formats/snapshot/kv_plan.h && fail "one options struct for all three lives"
grep -q 'const tq_kvsnap_run \*run, FILE \*out' formats/snapshot/kv_snapshot.h ||
    fail "execute does not take the run alone"

behaviour cmd_is_a_file_a_subcommand_and_the_cli_helpers
# cmd/ holds one source a subcommand (named as tq's table in main.c names it) and the CLI's
# shared helpers; a subcommand's measuring, planning or converting lives in formats/
helpers=" main cli cli_opts output progress json device "
subs=$(sed -n 's/^ *{"\([a-z0-9-]*\)",.*/\1/p' cmd/main.c | tr - _)
[ -n "$subs" ] || fail "no subcommand table read from cmd/main.c"
for sub in $subs; do
    [ -f "cmd/$sub.c" ] || fail "subcommand $sub has no cmd/$sub.c"
done
for f in cmd/*.c cmd/*.h; do
    base=$(basename "$f"); base=${base%.*}
    case "$helpers" in *" $base "*) continue ;; esac
    case "$f" in *.h) fail "$f: a subcommand shares no header (cmd/ helpers alone have one)" ;; esac
    printf '%s\n' $subs | grep -qx -- "$base" || fail "$f is neither a subcommand nor a CLI helper"
done

behaviour every_formats_folder_keeps_its_spec
# a folder a format or a stage, its specification as markdown beside its code
for d in formats/*/; do
    ls "$d"*.md >/dev/null 2>&1 || fail "$d has no specification (*.md) beside its code"
    grep -q "\*\*\`$(basename "$d")/\`\*\*" formats/README.md ||
        fail "formats/README.md has no paragraph for $(basename "$d")/"
done

behaviour lib_internals_stay_in_lib
bad=$(grep -ln '#include "\(tq_internal\|tq_fwht\|tq_half\)\.h"' formats/*/*.[ch] cmd/*.[ch])
[ -z "$bad" ] || fail "lib internal headers included by: $bad"

behaviour byte_formats_include_only_byte_formats
# the headers a file includes, by name, that live in one of these folders
includes_from() { # FILES... ; DIR
    dir=$1; shift
    for f in "$@"; do
        for h in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
            [ -f "$dir/$h" ] && echo "$f includes $dir/$h"
        done
    done
    return 0
}
# the byte formats: formats/tqkv, gguf, state, npy, io and seal
bytes="formats/tqkv/*.[ch] formats/gguf/*.[ch] formats/state/*.[ch] formats/npy/*.[ch]"
bytes="$bytes formats/io/*.[ch] formats/seal/*.[ch]"
# shellcheck disable=SC2086
bad=$(includes_from formats/model $bytes; includes_from formats/snapshot $bytes
      includes_from formats/store $bytes; includes_from formats/weights $bytes
      includes_from formats/bench $bytes)
[ -z "$bad" ] || fail "byte formats reach up a layer: $bad"
bad=$(includes_from formats/snapshot formats/model/*.[ch])
[ -z "$bad" ] || fail "model facts reach the snapshot pipeline: $bad"

behaviour only_formats_model_reads_architecture_keys
# a model's hparams are read once, by formats/model/model.c (tq_model_read): no other code
# names an {arch}-prefixed key or builds one from general.architecture
keys='(\.block_count|\.attention\.|\.rope\.|\.embedding_length|\.context_length|\.feed_forward_length)'
# shellcheck disable=SC2086
bad=$(grep -nE "\"[^\"]*$keys[^\"]*\"" lib/*.[ch] $bytes formats/snapshot/*.[ch] cmd/*.[ch])
[ -z "$bad" ] || fail "architecture keys read outside formats/model/: $bad"
bad=$(grep -ln 'general\.architecture' lib/*.c formats/tqkv/*.c formats/gguf/*.c formats/state/*.c \
      formats/io/*.c formats/snapshot/*.c cmd/*.c |
      grep -v '^cmd/inspect\.c$')
[ -z "$bad" ] || fail "general.architecture read outside formats/model/ (and inspect's listing): $bad"

behaviour encode_kvdump_holds_no_innerq_derivation
bad=$(grep -n 'tq_innerq_stats\|tq_innerq_derive\|tq_innerq_scales\|tq_attn_model' cmd/encode_kvdump.c)
[ -z "$bad" ] || fail "InnerQ calibration in cmd/encode_kvdump.c: $bad"

behaviour kv_sources_do_not_know_each_other
for src in llama_state llama_state_write; do
    grep -n 'kv_numpy\|tq_numpy\|TQNI' formats/state/$src.c &&
        fail "formats/state/$src.c refers to the NumPy source"
done
for src in kv_numpy kv_numpy_write; do
    grep -n 'llama_state\|tq_llama\|GGSN\|GGSQ' formats/state/$src.c &&
        fail "formats/state/$src.c refers to the llama.cpp state source"
done
grep -q 'tq_numpy_open_memory' tests/fuzz/fuzz_numpy_read.c || fail "the NumPy fuzz target must call the NumPy reader"
behaviour no_function_over_80_lines
# functions: a line starting an identifier with '(' up to the '{' and '}' in
# column 0 (the layout every file here uses)
long=$(awk 'FNR == 1 { head = 0 }
    /^[A-Za-z_].*\(/ && !/;[ \t]*$/ { head = FNR; name = $0 }
    /^\{/ { start = head }
    /^\}/ && start { if (FNR - start + 1 > 80) printf "%s:%d %d lines: %s\n", FILENAME, start, FNR - start + 1, name; start = 0 }' \
    lib/*.c lib/*.inc formats/*/*.c cmd/*.c)
[ -z "$long" ] || fail "functions over 80 lines:
$long"

behaviour no_source_file_over_700_lines
long=$(wc -l lib/*.c lib/*.h lib/*.inc formats/*/*.c formats/*/*.h cmd/*.c cmd/*.h |
       awk '$2 != "total" && $1 > 700 { print $2 ": " $1 " lines" }')
[ -z "$long" ] || fail "source files over 700 lines: $long"

behaviour the_architecture_lives_in_the_repository
# a clone has no ../shared: HACKING.md says the seams itself, and nothing points elsewhere
bad=$(grep -n 'shared/reference' HACKING.md README.md tests/cli/seams.sh | grep -v 'bad=')
[ -z "$bad" ] || fail "the architecture pointed at outside the repository: $bad"
grep -q '^## Seams$' HACKING.md || fail "HACKING.md has no Seams section"

behaviour every_help_states_every_form_it_takes
# a KV input may be a pipe or an object; a model is a file; the store a directory or S3
for sub in encode-kvdump decode-kvdump inspect calibrate-innerq bench; do
    $tq help $sub >"$tmp/help" 2>&1
    grep -q -- "- (a pipe" "$tmp/help" || fail "tq help $sub names no pipe (-)"
    grep -q "s3://bucket/key" "$tmp/help" || fail "tq help $sub names no object (s3://)"
done
for sub in quantize-tq4 rotate-weights; do
    $tq help $sub | grep -q "IN and OUT are files" || fail "tq help $sub: where IN and OUT may be"
done
$tq help slot >"$tmp/help" 2>&1
grep -q "s3://bucket/prefix" "$tmp/help" || fail "tq help slot names no S3 store"
for form in save restore proxy ls gc check; do
    grep -q "^ *\(usage: \)\{0,1\}tq slot $form " "$tmp/help" || fail "tq help slot: no '$form' form"
    $tq slot 2>&1 | grep -q "$form" || fail "tq slot's usage error leaves out $form"
done

behaviour the_restore_point_rule_has_one_owner
# formats/state/restore_point.c decides where a state restores; the others ask it
owner=formats/state/restore_point.c
[ -f "$owner" ] && [ -f formats/state/restore_point.h ] && [ -f formats/state/RESTORE_POINTS.md ] ||
    fail "the rule's file, header or spec is missing"
# each function the header declares is defined in the owner alone and named in the spec
for fn in $(sed -n 's/^[a-z_ ]*[ *]\(tq_restore_[a-z_]*\)(.*/\1/p' formats/state/restore_point.h); do
    defs=$(grep -l "^[a-z][a-z_0-9 ]*[ *]$fn(" lib/*.c formats/*/*.c cmd/*.c)
    [ "$defs" = "$owner" ] || fail "$fn defined in: $defs"
    grep -q "$fn" formats/state/RESTORE_POINTS.md || fail "$fn not in RESTORE_POINTS.md"
done
# no copy of its constants or of the decisions it owns: a pad, the window's threshold, a point
# weighed against `from`, exact points from the model
bad=$(grep -nE 'pad_window = [1-9]|(point|limit) *[<>]=?[^;]*swa_window|(point|limit) *[<>]=? *[a-z_.>-]*from\b' \
      formats/*/*.c cmd/*.c | grep -v "^$owner:")
[ -z "$bad" ] || fail "the rule decided outside its owner: $bad"
bad=$(grep -nE '= [a-z_.>-]*swa_window \|\| |n_recurrent \|\|' formats/*/*.c cmd/*.c | grep -v "^$owner:")
[ -z "$bad" ] || fail "exact points worked out outside the owner: $bad"

behaviour a_fork_revision_is_a_row
# lib/fork_revisions.c holds the revisions (a row each); lib/tq.h names none, and code
# elsewhere names one only in the state reader's probes (how a state's bytes tell a revision)
revs='pr197\|69d8e4be4\|010d04edc\|00910b10\|45f8a066'
bad=$(grep -in "$revs" lib/tq.h)
[ -z "$bad" ] || fail "lib/tq.h names a revision: $bad"
bad=$(grep -rn -i "\"[^\"]*\($revs\)[^\"]*\"" lib formats cmd --include=*.c --include=*.h |
      grep -v '^lib/fork_revisions\.c:' |
      grep -v '^formats/state/llama_state\.c:[0-9]*: *{"[0-9a-z]*", *HOLDS_')
[ -z "$bad" ] || fail "a revision named outside its row: $bad"
grep -q '^### Adding a fork revision' HACKING.md || fail "HACKING.md does not say how to add one"

behaviour json_keys_are_written_by_jansson
# every --json document is a jansson tree written by cmd/json.c's one writer: no key in a C
# string with its quotes escaped, no brace or bracket printed, and no JSON helper that prints
bad=$(grep -n '\\"[a-z_]*\\": ' cmd/*.c)
[ -z "$bad" ] || fail "JSON keys written by printf: $bad"
bad=$(grep -nE 'printf\([^;]*"[^"]*(\{\\"|\\"\}|\]\}|\[\\")' cmd/*.c)
[ -z "$bad" ] || fail "JSON braces written by printf: $bad"
bad=$(grep -nE '^(void|int) json_' cmd/json.h | grep -v 'json_write')
[ -z "$bad" ] || fail "a JSON helper that prints beside the writer: $bad"
grep -q 'json_write_report' cmd/json.h || fail "no one JSON writer in cmd/json.h"

exit 0
