#!/bin/sh
# The CLI scripts' harness (tests/cli/common.inc) and tests/run.sh's report: a behaviour that
# fails is one FAIL line of its own, and the behaviours after it still run and report.
set -u
. tests/cli/common.inc

behaviour a_failed_behaviour_hides_none_after_it
cat >"$tmp/t.sh" <<'SH'
. tests/cli/common.inc
behaviour first_holds
true || fail "first"
behaviour second_fails
false || fail "second broke"
false || fail "second again"
behaviour third_holds
true || fail "third"
SH
log=$(sh "$tmp/t.sh" 2>&1)
rc=$?
[ $rc -eq 1 ] || fail "a script with a failed behaviour exited $rc"
want=$(printf 'ok first_holds\nFAIL: second_fails: second broke\nok third_holds')
[ "$log" = "$want" ] || fail "the script printed: $log"

behaviour run_sh_reports_each_behaviour_on_its_own
sed -n '/^report()/,/^}/p' tests/run.sh >"$tmp/report.sh"
out=$tmp/report.out
. "$tmp/report.sh"
report cli t 1 "$log"
grep -qx "ok cli/t/first_holds" "$out" || fail "first not reported: $(cat "$out")"
grep -qx "ok cli/t/third_holds" "$out" || fail "third not reported: $(cat "$out")"
grep -qx "FAIL cli/t/second_fails" "$out" || fail "second's failure not reported: $(cat "$out")"
[ "$(grep -c '^FAIL' "$out")" -eq 1 ] || fail "not one FAIL line: $(cat "$out")"

behaviour run_sh_shows_each_result_as_its_script_finishes
# a tree of three scripts and a unit runner, run by a copy of tests/run.sh
mkdir -p "$tmp/tree/tests/cli" "$tmp/tree/tests/oracle" "$tmp/tree/build/tests"
cp tests/run.sh tests/cli/common.inc "$tmp/tree/tests/" || fail "cp"
printf '#!/bin/sh\necho "ok unit_one"\n' >"$tmp/tree/build/tests/unit-runner"
chmod +x "$tmp/tree/build/tests/unit-runner"
printf 'echo "ok a_holds"\n' >"$tmp/tree/tests/cli/a.sh"
printf 'echo "FAIL: b_breaks: it broke"\nexit 1\n' >"$tmp/tree/tests/cli/b.sh"
printf 'import sys\nprint("SKIP: no oracle here")\nsys.exit(77)\n' >"$tmp/tree/tests/oracle/c.py"
# a skip stays a skip here (CI sets TQ_REQUIRE_ORACLES=1, which makes it a failure)
# one lane: the scripts finish in the queue's order; the order kept in a cache of its own
log=$(TQ_NO_SETUP=1 TQ_REQUIRE_ORACLES=0 TQ_TEST_JOBS=1 XDG_CACHE_HOME="$tmp/cache" \
    sh "$tmp/tree/tests/run.sh" 2>&1)
rc=$?
[ $rc -eq 1 ] || fail "a run with a failure exited $rc"
line() { printf '%s\n' "$log" | grep -n -- "$1" | head -n 1 | cut -d: -f1; }
a=$(line "^ok cli/a/a_holds$")
a_done=$(line "^  -- cli/a: [0-9.]* s, cores busy [0-9.]*; so far 2 passed, 0 failed, 0 skipped$")
b=$(line "^FAIL cli/b/b_breaks$")
c_done=$(line "^  -- oracle/c: [0-9.]* s, cores busy [0-9.]*; so far 2 passed, 1 failed, 1 skipped$")
slowest=$(line "^the slowest (seconds):$")
[ -n "$a" ] && [ -n "$a_done" ] && [ -n "$b" ] && [ -n "$c_done" ] && [ -n "$slowest" ] &&
    [ "$a" -lt "$a_done" ] && [ "$a_done" -lt "$b" ] && [ "$c_done" -lt "$slowest" ] ||
    fail "not each result as its script finished: $log"
[ "$(printf '%s\n' "$log" | grep -c '^  [0-9.]* \(unit\|cli\|oracle\)/')" -eq 4 ] ||
    fail "not four scripts among the slowest: $log"
[ "$(printf '%s\n' "$log" | tail -n 1)" = "2 passed, 1 failed" ] || fail "the last line: $log"

behaviour run_sh_runs_scripts_in_lanes_at_once
# two scripts that each wait for the other to have started: both hold only when they run at once
mkdir -p "$tmp/lanes/tests/cli" "$tmp/lanes/tests/oracle" "$tmp/lanes/build/tests"
cp tests/run.sh tests/cli/common.inc "$tmp/lanes/tests/" || fail "cp"
printf '#!/bin/sh\necho "ok unit_one"\n' >"$tmp/lanes/build/tests/unit-runner"
chmod +x "$tmp/lanes/build/tests/unit-runner"
for me in x y; do
    other=y
    [ $me = y ] && other=x
    cat >"$tmp/lanes/tests/cli/$me.sh" <<SH
touch "$tmp/lanes/$me.started"
i=0
while [ ! -e "$tmp/lanes/$other.started" ] && [ \$i -lt 300 ]; do sleep 0.1; i=\$((i + 1)); done
[ -e "$tmp/lanes/$other.started" ] && echo "ok ${me}_met_$other" || echo "FAIL: ${me}_met_$other: alone"
SH
done
log=$(TQ_NO_SETUP=1 TQ_TEST_JOBS=2 XDG_CACHE_HOME="$tmp/cache2" sh "$tmp/lanes/tests/run.sh" 2>&1)
[ "$(printf '%s\n' "$log" | tail -n 1)" = "3 passed, 0 failed" ] || fail "two lanes: $log"
# the next run's order: the times of this one, kept in the cache
[ "$(wc -l <"$tmp/cache2/tq/test-times")" -eq 3 ] ||
    fail "times kept: $(cat "$tmp/cache2/tq/test-times" 2>&1)"

behaviour run_sh_orders_a_first_run_by_the_times_kept_with_the_tests
# no cache of its own yet: tests/test-times puts b (slower there) before a, one lane
mkdir -p "$tmp/first/tests/cli" "$tmp/first/tests/oracle" "$tmp/first/build/tests"
cp tests/run.sh tests/cli/common.inc "$tmp/first/tests/" || fail "cp"
printf '#!/bin/sh\necho "ok unit_one"\n' >"$tmp/first/build/tests/unit-runner"
chmod +x "$tmp/first/build/tests/unit-runner"
printf 'echo "ok a_holds"\n' >"$tmp/first/tests/cli/a.sh"
printf 'echo "ok b_holds"\n' >"$tmp/first/tests/cli/b.sh"
printf '90.0 cli/b\n80.0 unit/unit-runner\n1.0 cli/a\n' >"$tmp/first/tests/test-times"
log=$(TQ_NO_SETUP=1 TQ_TEST_JOBS=1 XDG_CACHE_HOME="$tmp/cache3" sh "$tmp/first/tests/run.sh" 2>&1)
order=$(printf '%s\n' "$log" | sed -n 's/^  -- \([a-z]*\/[a-z_-]*\): .*/\1/p' | tr '\n' ' ')
[ "$order" = "cli/b unit/unit-runner cli/a " ] ||
    fail "order $order, kept 'cli/b unit/unit-runner cli/a': $log"

behaviour run_sh_leaves_the_long_guards_to_the_full_run
# kv_long_* run in make test-full (TQ_TEST_FULL=1, what CI runs) and are skipped, said, in make test
mkdir -p "$tmp/full/tests/cli" "$tmp/full/tests/oracle" "$tmp/full/build/tests"
cp tests/run.sh tests/cli/common.inc "$tmp/full/tests/" || fail "cp"
printf '#!/bin/sh\necho "ok unit_one"\n' >"$tmp/full/build/tests/unit-runner"
chmod +x "$tmp/full/build/tests/unit-runner"
printf 'print("ok guarded")\n' >"$tmp/full/tests/oracle/kv_long_gemma.py"
printf 'echo "ok full_is_${TQ_TEST_FULL:-0}"\n' >"$tmp/full/tests/cli/sees.sh"
short=$(TQ_NO_SETUP=1 TQ_TEST_FULL=0 XDG_CACHE_HOME="$tmp/cache4" sh "$tmp/full/tests/run.sh" 2>&1)
full=$(TQ_NO_SETUP=1 TQ_TEST_FULL=1 XDG_CACHE_HOME="$tmp/cache4" sh "$tmp/full/tests/run.sh" 2>&1)
printf '%s\n' "$short" | grep -q '^SKIP: oracle/kv_long_gemma: a long-context guard (make test-f' &&
    ! printf '%s\n' "$short" | grep -q '^ok oracle/kv_long_gemma' &&
    printf '%s\n' "$short" | grep -q '^ok cli/sees/full_is_0$' ||
    fail "make test ran the guard or said nothing of it: $short"
printf '%s\n' "$full" | grep -q '^ok oracle/kv_long_gemma/guarded$' &&
    printf '%s\n' "$full" | grep -q '^ok cli/sees/full_is_1$' &&
    [ "$(printf '%s\n' "$full" | tail -n 1)" = "3 passed, 0 failed" ] ||
    fail "make test-full skipped the guard: $full"

behaviour no_test_rebuilds_the_shared_build_with_another_cuda_setting
# scripts run at once in lanes: a `make CUDA=0` of a tool (its libraries rebuilt, the stamp
# build/cuda-0.stamp) and a later plain `make` (back to the default) relinked ./tq while another
# lane ran it ("./tq: Permission denied"); a test makes with the build's own setting, and only
# cuda_build.sh switches it, in its own build folder (B=build/cuda)
bad=$(grep -rnE '(^|[^A-Za-z_])CUDA=[01]' tests/cli/*.sh tests/oracle/*.py tests/bench/*.py \
    tests/run.sh | grep -v '^tests/cli/cuda_build.sh:' | grep -v '^tests/cli/harness.sh:')
[ -z "$bad" ] || fail "a test switches the build's CUDA setting: $bad"
