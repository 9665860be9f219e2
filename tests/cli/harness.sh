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
