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
# tq slot against a hostile server and store, and on the tiny sliding-window and hybrid models
# (a real llama-server), the S3 client against radosgw, and sealed stores (keys, AES-GCM, keyed
# names); each skipped without its oracle
for t in slot_hostile slot_families s3_snapshots slot_sealed; do
    out=$(TQ_BIN=$san python3 tests/oracle/$t.py 2>&1); rc=$?
    [ $rc -eq 77 ] && continue
    if [ $rc -ne 0 ]; then echo "FAIL: $t under sanitizers (exit $rc)"; printf '%s\n' "$out" | grep -v '^ok' | tail -n 20; exit 1; fi
    if printf '%s\n' "$out" | grep -q "AddressSanitizer\|LeakSanitizer\|runtime error"; then
        echo "FAIL: $t: sanitizer report"; printf '%s\n' "$out" | grep -A 12 "Sanitizer\|runtime error" | head -n 30; exit 1
    fi
done
exit 0
