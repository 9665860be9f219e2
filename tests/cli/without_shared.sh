#!/bin/sh
# A user's machine has no ../shared: the golden-file tests must skip with a
# reason while the embedded compatibility vectors still run and pass.
out=$(TQ_SHARED=/nonexistent/shared ./build/tests/unit-runner golden_embedded_kv_blocks \
      golden_embedded_weight_blocks golden_shared_kv_decode golden_shared_kv_encode golden_shared_weights 2>&1)
rc=$?
[ $rc -eq 0 ] || { printf '%s\n' "$out"; exit 1; }
[ "$(printf '%s\n' "$out" | grep -c '^SKIP: golden_shared_.*: ../shared/golden not found')" -eq 3 ] || exit 1
[ "$(printf '%s\n' "$out" | grep -c '^ok golden_embedded_')" -eq 2 ] || exit 1
# The whole unit suite under ASan/UBSan (leaks included) as a user runs it:
# every test that needs ../shared skips, and a skip path frees what it took.
[ -x build/tests/unit-runner-san ] || { echo "build/tests/unit-runner-san not built"; exit 1; }
san=$(TQ_SHARED=/nonexistent/shared ASAN_OPTIONS=detect_leaks=1 ./build/tests/unit-runner-san 2>&1)
rc=$?
[ $rc -eq 0 ] || { printf '%s\n' "$san" | grep -v '^ok' | tail -n 20; echo "sanitized unit tests without ../shared: exit $rc"; exit 1; }
printf '%s\n' "$san" | grep '^FAIL' && exit 1
exit 0
