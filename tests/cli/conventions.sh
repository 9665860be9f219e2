#!/bin/sh
# The CLI conventions of tq(1): help and version on stdout with status 0,
# usage errors as one line on stderr with status 2, unbuilt subcommands say so.
set -u
tq=./tq
fail() { echo "FAIL: $*"; exit 1; }
expect() { # expect STATUS CMD...
    want=$1; shift
    "$@" >/tmp/tq_cli_out.$$ 2>/tmp/tq_cli_err.$$; got=$?
    [ "$got" = "$want" ] || fail "'$*' exited $got, expected $want: $(cat /tmp/tq_cli_err.$$)"
}
trap 'rm -f /tmp/tq_cli_out.$$ /tmp/tq_cli_err.$$' EXIT

expect 0 $tq --help
grep -q '^usage: tq' /tmp/tq_cli_out.$$ || fail "--help lacks a usage line"
for sub in rotate-weights quantize-tq4 calibrate-innerq encode-kvdump decode-kvdump inspect bench slot; do
    grep -q "  $sub " /tmp/tq_cli_out.$$ || fail "--help does not list $sub"
done
expect 0 $tq --version
grep -Eq '^tq [0-9]+\.[0-9]+\.[0-9]+ ' /tmp/tq_cli_out.$$ || fail "--version format: $(cat /tmp/tq_cli_out.$$)"
expect 0 $tq help bench
grep -q 'usage: tq bench' /tmp/tq_cli_out.$$ || fail "help bench prints no usage"
expect 2 $tq
expect 2 $tq no-such-command
grep -q "unknown subcommand 'no-such-command'" /tmp/tq_cli_err.$$ || fail "unknown subcommand message"
[ "$(wc -l </tmp/tq_cli_err.$$)" -eq 1 ] || fail "usage error is not one line"
expect 2 $tq help no-such-command
for sub in rotate-weights quantize-tq4 calibrate-innerq encode-kvdump decode-kvdump inspect slot; do
    if $tq help $sub | grep -q 'not implemented yet'; then
        expect 2 $tq $sub
        grep -q 'not implemented yet' /tmp/tq_cli_err.$$ || fail "$sub: no 'not implemented yet'"
    fi
done
expect 2 $tq bench weights --values nope
grep -q -- "--values: 'nope'" /tmp/tq_cli_err.$$ || fail "bad --values message: $(cat /tmp/tq_cli_err.$$)"
expect 2 $tq bench --frobnicate
expect 2 $tq bench kv --cuda
expect 2 $tq bench weights --cuda
grep -q -- "--cuda: the weights bench measures the CPU" /tmp/tq_cli_err.$$ ||
    fail "bench weights --cuda: $(cat /tmp/tq_cli_err.$$)"
expect 2 $tq bench sideways
exit 0
