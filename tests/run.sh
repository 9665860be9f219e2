#!/bin/sh
# tests/run.sh - runs every test: the C unit runner (also under ASan/UBSan), the CLI scripts in
# tests/cli and the oracle scripts in tests/oracle.  Each test prints one line (ok / FAIL /
# SKIP: reason), shown as its script finishes with the script's time, the cores the machine
# kept busy meanwhile and the count so far; then the ten slowest scripts, what failed again, and
# the last line "N passed, N failed".
# The scripts run in lanes, TQ_TEST_JOBS at once (default: the cores, at least 2): most of a
# script's time is one llama-server or one tq process that keeps a core or two busy, or a wait
# on a server; the slowest of the last run start first (their times are kept in
# ~/.cache/tq/test-times) so that the lanes end together, a test it did not time before them.
# TQ_TEST_JOBS=1 runs one at a time.  A clone's first run orders them by tests/test-times (a
# run's times, kept with the tests).
# TQ_TEST_FULL=1 (make test-full; CI) runs every variant of a scenario and the long-context
# guards; make test runs each behaviour on both models once and skips those guards, saying so
# (HACKING.md, "make test and make test-full").
# TQ_REQUIRE_ORACLES=1 turns a missing oracle into a failure.
cd "$(dirname "$0")/.." || exit 1
cache=${XDG_CACHE_HOME:-$HOME/.cache}/tq
# what the tests share is made before the lanes start, once: the oracles' Python environment
# (tests/setup_oracles.sh; without it the oracle tests skip), llama-server (tests/setup_server.sh)
# and the object store's packages (tests/setup_s3.sh tools)
# (each with the seconds it took: minutes on a first run, nothing after)
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }'; }
if [ "${TQ_NO_SETUP:-0}" != 1 ]; then
    t=$(now)
    bin=$(sh tests/setup_oracles.sh)
    [ -n "$bin" ] && export PATH="$bin:$PATH"
    [ -n "$bin" ] && echo "oracles: $(dirname "$bin") ($(since "$t") s)"
    t=$(now)
    if [ -n "$bin" ]; then server=$(sh tests/setup_server.sh); fi
    [ -n "${server:-}" ] && echo "llama-server: $server ($(since "$t") s)"
    sh tests/setup_s3.sh tools >/dev/null 2>&1
fi
res=$(mktemp -d)   # each script's results, the queue, the lanes' log of what finished
out=$res/all       # every result line, in the order the scripts finished
times=$res/times   # "SECONDS KIND/NAME (cores busy N)" a script, for the slowest at the end
: >"$out"
: >"$times"
trap 'rm -rf "$res"' EXIT
trap 'exit 130' INT TERM
# the machine's busy CPU time so far, in clock ticks (0 where there is no /proc/stat): a script's
# cores in use tell a script that waits from one that computes
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; f = 1 } END { if (!f) print 0 }' \
    /proc/stat 2>/dev/null || echo 0; }
hz=$(getconf CLK_TCK 2>/dev/null || echo 100)

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
               "$(printf '%s\n' "$log" | tail -n 15 | sed 's/^/    /')" >>"$out"
    esac
}

# The oracle scripts of tq's untrusted inputs run with tq built under ASan/UBSan (every tq call
# they make instrumented, an error fatal, leaks checked): tq slot against a hostile server and
# store and on the sliding-window and hybrid tiny models, the S3 client against radosgw, sealed
# stores.  Their behaviours hold as they do with tq itself, and no sanitizer reports.
sanitized="slot_hostile slot_families s3_snapshots slot_sealed"
sanitized_oracle() {
    san=build/tests/tq-san
    if [ ! -x $san ]; then
        echo "FAIL oracle/$1: $san missing (make test builds it)" >>"$out"
        return
    fi
    log=$(TQ_BIN=$san ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
        UBSAN_OPTIONS=print_stacktrace=1 python3 "tests/oracle/$1.py" 2>&1)
    rc=$?
    if printf '%s\n' "$log" | grep -q "AddressSanitizer\|LeakSanitizer\|runtime error"; then
        printf 'FAIL oracle/%s: a sanitizer report\n%s\n' "$1" "$(printf '%s\n' "$log" |
            grep -A 12 "Sanitizer\|runtime error" | head -n 30 | sed 's/^/    /')" >>"$out"
    fi
    report oracle "$1" $rc "$log"
}

# run_one KIND NAME: one test, its result lines written to $out (the lane's own file)
run_one() {
    case $1 in
        unit)
            ./build/tests/unit-runner >>"$out" 2>&1 ||
                echo "FAIL unit-runner exited with status $?" >>"$out" ;;
        sanitizers) # the unit tests again under ASan/UBSan: one line for the whole run
            log=$(ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
                ./build/tests/unit-runner-san 2>&1); rc=$?
            if [ $rc -eq 0 ] && ! printf '%s\n' "$log" | grep -q '^FAIL'; then
                echo "ok sanitizers/unit-tests-under-asan-ubsan" >>"$out"
            else
                printf 'FAIL sanitizers/unit-tests-under-asan-ubsan (exit %s)\n%s\n' "$rc" \
                    "$(printf '%s\n' "$log" | grep -v '^ok' | tail -n 30 | sed 's/^/    /')" >>"$out"
            fi ;;
        cli)
            log=$(sh "tests/cli/$2.sh" 2>&1)
            report cli "$2" $? "$log" ;;
        oracle)
            case " $sanitized " in
                *" $2 "*) sanitized_oracle "$2" ;;
                *) log=$(python3 "tests/oracle/$2.py" 2>&1)
                   report oracle "$2" $? "$log" ;;
            esac ;;
    esac
}

# the long-context guards, the full run's alone (minutes of prefill at 8K tokens and more)
full_only="kv_long_gemma kv_long_smollm2"
# the queue: "KIND NAME" a line, those the last run did not time first (in this order), then
# the slowest of the last run (of a run in this clone's cache, else the times kept with the tests)
echo "unit unit-runner" >"$res/tests"
[ -x build/tests/unit-runner-san ] && echo "sanitizers unit-runner-san" >>"$res/tests"
for t in tests/cli/*.sh tests/oracle/*.py; do
    [ -f "$t" ] || continue
    case $(basename "$t") in _*) continue ;; esac # helper modules
    base=$(basename "$t")
    case " $full_only " in
        *" ${base%.py} "*)
            if [ "${TQ_TEST_FULL:-0}" != 1 ]; then
                echo "SKIP: oracle/${base%.py}: a long-context guard (make test-full runs it)" \
                    >>"$out"
                continue
            fi ;;
    esac
    case $t in *.sh) echo "cli ${base%.sh}" ;; *) echo "oracle ${base%.py}" ;; esac
done >>"$res/tests"
timed=$cache/test-times
[ -s "$timed" ] || timed=tests/test-times
awk 'NR == FNR { t[$2] = $1; next }
     { k = $1 "/" $2; print (k in t ? t[k] : 1e9), NR, $0 }' \
    "$timed" "$res/tests" 2>/dev/null | sort -k1,1gr -k2,2n | cut -d' ' -f3- \
    >"$res/queue"
[ -s "$res/queue" ] || cp "$res/tests" "$res/queue"
total=$(wc -l <"$res/queue")
cat "$out"   # the guards left to the full run

# take: the queue's next line (a lock of mkdir: one lane takes it)
take() {
    until mkdir "$res/lock" 2>/dev/null; do sleep 0.05; done
    line=$(head -n 1 "$res/queue")
    [ -n "$line" ] && sed -i 1d "$res/queue"
    rmdir "$res/lock"
    [ -n "$line" ] && echo "$line"
}

# lane N: takes tests until none is left; each one's results go to its own file and a line
# "ID KIND/NAME T0 BUSY0" to the lanes' log when it has finished
lane() {
    n=0
    while item=$(take); do
        n=$((n + 1))
        id=$1.$n
        t0=$(now)
        b0=$(busy)
        out=$res/$id.out
        : >"$out"
        # shellcheck disable=SC2086 # KIND NAME
        run_one $item
        echo "$id $(echo "$item" | tr ' ' /) $t0 $b0" >>"$res/finished"
    done
}

# progress ID KIND/NAME T0 BUSY0: a finished script's results, then its time, the cores the
# machine kept busy meanwhile and the count
progress() {
    cat "$res/$1.out" >>"$out"
    t=$(awk -v a="$3" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
    cores=$(awk -v a="$4" -v b="$(busy)" -v t="$t" -v hz="$hz" \
        'BEGIN { if (t > 0) printf "%.1f", (b - a) / hz / t; else printf "0.0" }')
    echo "$t $2 (cores busy $cores)" >>"$times"
    cat "$res/$1.out"
    echo "  -- $2: ${t} s, cores busy $cores; so far $(grep -c '^ok ' "$out") passed," \
        "$(grep -c '^FAIL ' "$out") failed, $(grep -c '^SKIP: ' "$out") skipped"
}

jobs=${TQ_TEST_JOBS:-$(nproc 2>/dev/null || echo 2)}
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1
[ "${TQ_TEST_JOBS:-}" ] || [ "$jobs" -ge 2 ] || jobs=2
# llama.cpp's threads a lane (servers, the oracles' contexts): the cores shared out, at least one
cores=$(nproc 2>/dev/null || echo 2)
[ -n "${TQ_TEST_THREADS:-}" ] || TQ_TEST_THREADS=$(( cores / jobs > 0 ? cores / jobs : 1 ))
export TQ_TEST_THREADS
: >"$res/finished"
pids=
i=0
while [ $i -lt "$jobs" ]; do
    i=$((i + 1))
    lane $i &
    pids="$pids $!"
done
seen=0
while [ $seen -lt "$total" ]; do
    n=$(wc -l <"$res/finished")
    while [ $seen -lt "$n" ]; do
        seen=$((seen + 1))
        # shellcheck disable=SC2046 # ID KIND/NAME T0 BUSY0
        progress $(sed -n "${seen}p" "$res/finished")
    done
    [ $seen -lt "$total" ] || break
    alive=0
    for p in $pids; do kill -0 "$p" 2>/dev/null && alive=1; done
    if [ $alive = 0 ] && [ "$(wc -l <"$res/finished")" -eq $seen ]; then
        echo "FAIL run.sh: the lanes ended with $((total - seen)) tests not run" >>"$out"
        break
    fi
    sleep 0.2
done
wait

echo "the slowest (seconds):"
sort -rn "$times" | head -n 10 | sed 's/^/  /'
# the times this run took, for the next run's order (kept where the cache is)
if mkdir -p "$cache" 2>/dev/null; then
    awk '{ print $1, $2 }' "$times" >"$cache/test-times.$$" &&
        mv "$cache/test-times.$$" "$cache/test-times"
fi
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
