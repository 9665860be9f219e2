#!/bin/sh
# The command-line tests again with tq built under ASan/UBSan (leak checks
# on): every subcommand's paths, good and bad input, without a report.
set -u
san=build/tests/tq-san
[ -x $san ] || { echo "FAIL: $san missing (make test builds it)"; exit 1; }
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1
for t in inspect kvdump quantize rotate options bench innerq errors snapshot_source \
         hostile_outputs; do
    out=$(TQ=$san sh tests/cli/$t.sh 2>&1); rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then echo "FAIL: $t under sanitizers (exit $rc)"; printf '%s\n' "$out" | tail -n 20; exit 1; fi
    if printf '%s\n' "$out" | grep -q "AddressSanitizer\|LeakSanitizer\|runtime error"; then
        echo "FAIL: $t: sanitizer report"; printf '%s\n' "$out" | grep -A 12 "Sanitizer\|runtime error" | head -n 30; exit 1
    fi
done
# the oracle scripts of tq slot's and the S3 client's untrusted inputs run with this build in
# tests/run.sh (its list "sanitized"), not twice
exit 0
