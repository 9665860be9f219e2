#!/bin/sh
# tests/run.sh - runs every test: the C unit runner, the CLI scripts in
# tests/cli and the oracle scripts in tests/oracle.  Each test prints one line
# (ok / FAIL / SKIP: reason); the last line is "N passed, N failed".
# TQ_REQUIRE_ORACLES=1 turns a missing oracle into a failure.
cd "$(dirname "$0")/.." || exit 1
# the oracles' own Python environment, made once (tests/setup_oracles.sh);
# without it the oracle tests skip
if [ "${TQ_NO_SETUP:-0}" != 1 ]; then
    bin=$(sh tests/setup_oracles.sh)
    if [ -n "$bin" ]; then export PATH="$bin:$PATH"; echo "oracles: $(dirname "$bin")"; fi
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT

./build/tests/unit-runner >>"$out" 2>&1 || echo "FAIL unit-runner exited with status $?" >>"$out"

# The unit tests again under ASan/UBSan: one line for the whole run.
if [ -x build/tests/unit-runner-san ]; then
    log=$(ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ./build/tests/unit-runner-san 2>&1); rc=$?
    if [ $rc -eq 0 ] && ! printf '%s\n' "$log" | grep -q '^FAIL'; then
        echo "ok sanitizers/unit-tests-under-asan-ubsan" >>"$out"
    else
        printf 'FAIL sanitizers/unit-tests-under-asan-ubsan (exit %s)\n%s\n' "$rc" "$(printf '%s\n' "$log" | grep -v '^ok' | tail -n 30 | sed 's/^/    /')" >>"$out"
    fi
fi

# report KIND NAME RC LOG: a script's results.  Each "ok NAME" line a behaviour that held and
# each "FAIL: NAME: why" line one that did not (tests/cli/common.inc runs a script's behaviours
# on past a failure), one result each; a script that names none is one result; exit 77 skips.
report() {
    kind=$1 name=$2 rc=$3 log=$4
    named=$(printf '%s\n' "$log" | sed -n 's/^ok \([a-z0-9][a-z0-9_-]*\)$/\1/p')
    failed=$(printf '%s\n' "$log" | sed -n 's/^FAIL: \([a-z0-9][a-z0-9_-]*\): .*/\1/p')
    # a behaviour that failed in a subshell may say ok too: its failure is what counts
    for b in $named; do
        printf '%s\n' "$failed" | grep -qx -- "$b" || echo "ok $kind/$name/$b" >>"$out"
    done
    for b in $failed; do
        printf 'FAIL %s/%s/%s\n%s\n' "$kind" "$name" "$b" \
            "$(printf '%s\n' "$log" | awk -v b="FAIL: $b: " 'index($0, b) == 1 { on = 1; print; next }
                /^(ok |FAIL: )/ { on = 0 } on && n++ < 8' | sed 's/^/    /')" >>"$out"
    done
    case $rc in
        0) [ -n "$named$failed" ] || echo "ok $kind/$name" >>"$out" ;;
        77) if [ "${TQ_REQUIRE_ORACLES:-0}" = 1 ]; then
                echo "FAIL $kind/$name: required but skipped: $(printf '%s\n' "$log" | tail -n 1)" >>"$out"
            else
                echo "SKIP: $kind/$name: $(printf '%s\n' "$log" | tail -n 1)" >>"$out"
            fi ;;
        *) [ -n "$failed" ] || printf 'FAIL %s/%s (exit %s)\n%s\n' "$kind" "$name" "$rc" \
               "$(printf '%s\n' "$log" | tail -n 15 | sed 's/^/    /')" >>"$out" ;;
    esac
}

for t in tests/cli/*.sh; do
    [ -f "$t" ] || continue
    log=$(sh "$t" 2>&1)
    report cli "$(basename "$t" .sh)" $? "$log"
done

for t in tests/oracle/*.py; do
    [ -f "$t" ] || continue
    case $(basename "$t") in _*) continue ;; esac  # helper modules
    log=$(python3 "$t" 2>&1)
    report oracle "$(basename "$t" .py)" $? "$log"
done

cat "$out"
passed=$(grep -c '^ok ' "$out")
failed=$(grep -c '^FAIL ' "$out")
skipped=$(grep -c '^SKIP: ' "$out")
[ "$skipped" -gt 0 ] && echo "($skipped skipped)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
