#!/bin/sh
# tests/run.sh - runs every test: the C unit runner, the CLI scripts in
# tests/cli and the oracle scripts in tests/oracle.  Each test prints one line
# (ok / FAIL / SKIP: reason), shown as its script finishes with the script's time and the count
# so far; then the ten slowest scripts, what failed again, and the last line "N passed, N
# failed".
# TQ_REQUIRE_ORACLES=1 turns a missing oracle into a failure.
cd "$(dirname "$0")/.." || exit 1
# the oracles' own Python environment, made once (tests/setup_oracles.sh);
# without it the oracle tests skip
if [ "${TQ_NO_SETUP:-0}" != 1 ]; then
    bin=$(sh tests/setup_oracles.sh)
    if [ -n "$bin" ]; then export PATH="$bin:$PATH"; echo "oracles: $(dirname "$bin")"; fi
fi
out=$(mktemp)
times=$(mktemp) # "SECONDS KIND/NAME" a script, for the slowest at the end
trap 'rm -f "$out" "$times"' EXIT
shown=0 # lines of $out already printed
now() { date +%s.%N; }
# the machine's busy CPU time so far, in clock ticks (0 where there is no /proc/stat): a script's
# cores in use tell a script that waits from one that computes
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; f = 1 } END { if (!f) print 0 }' \
    /proc/stat 2>/dev/null || echo 0; }
hz=$(getconf CLK_TCK 2>/dev/null || echo 100)

# progress KIND/NAME T0 BUSY0: the results a script added, as it finishes, then its time, the
# cores the machine kept busy meanwhile and the count
progress() {
    t=$(awk -v a="$2" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
    cores=$(awk -v a="$3" -v b="$(busy)" -v t="$t" -v hz="$hz" \
        'BEGIN { if (t > 0) printf "%.1f", (b - a) / hz / t; else printf "0.0" }')
    echo "$t $1 (cores busy $cores)" >>"$times"
    total=$(wc -l <"$out")
    if [ "$total" -gt "$shown" ]; then
        sed -n "$((shown + 1)),${total}p" "$out"
    fi
    shown=$total
    echo "  -- $1: ${t} s, cores busy $cores; so far $(grep -c '^ok ' "$out") passed," \
        "$(grep -c '^FAIL ' "$out") failed, $(grep -c '^SKIP: ' "$out") skipped"
}

t0=$(now)
b0=$(busy)
./build/tests/unit-runner >>"$out" 2>&1 || echo "FAIL unit-runner exited with status $?" >>"$out"
progress unit/unit-runner "$t0" "$b0"

# The unit tests again under ASan/UBSan: one line for the whole run.
if [ -x build/tests/unit-runner-san ]; then
    t0=$(now)
    b0=$(busy)
    log=$(ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ./build/tests/unit-runner-san 2>&1); rc=$?
    if [ $rc -eq 0 ] && ! printf '%s\n' "$log" | grep -q '^FAIL'; then
        echo "ok sanitizers/unit-tests-under-asan-ubsan" >>"$out"
    else
        printf 'FAIL sanitizers/unit-tests-under-asan-ubsan (exit %s)\n%s\n' "$rc" "$(printf '%s\n' "$log" | grep -v '^ok' | tail -n 30 | sed 's/^/    /')" >>"$out"
    fi
    progress sanitizers/unit-runner-san "$t0" "$b0"
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
    t0=$(now)
    b0=$(busy)
    log=$(sh "$t" 2>&1)
    report cli "$(basename "$t" .sh)" $? "$log"
    progress "cli/$(basename "$t" .sh)" "$t0" "$b0"
done

for t in tests/oracle/*.py; do
    [ -f "$t" ] || continue
    case $(basename "$t") in _*) continue ;; esac  # helper modules
    t0=$(now)
    b0=$(busy)
    log=$(python3 "$t" 2>&1)
    report oracle "$(basename "$t" .py)" $? "$log"
    progress "oracle/$(basename "$t" .py)" "$t0" "$b0"
done

echo "the slowest (seconds):"
sort -rn "$times" | head -n 10 | sed 's/^/  /'
if grep -q '^FAIL ' "$out"; then
    echo "what failed:"
    awk '/^FAIL / { on = 1; print; next } /^(ok |SKIP: )/ { on = 0 } on' "$out"
fi
passed=$(grep -c '^ok ' "$out")
failed=$(grep -c '^FAIL ' "$out")
skipped=$(grep -c '^SKIP: ' "$out")
[ "$skipped" -gt 0 ] && echo "($skipped skipped)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
