#!/bin/sh
# A user's machine has no ../shared: the golden-file tests must skip with a
# reason while the embedded compatibility vectors still run and pass.
# The later fork revisions' blocks are committed (tests/golden/NAME): they decode without it.
out=$(TQ_SHARED=/nonexistent/shared ./build/tests/unit-runner golden_embedded_kv_blocks \
      golden_embedded_weight_blocks golden_kv_decode_first_fork_blocks \
      golden_kv_decode_every_later_fork_revision golden_kv_encode_bytes_every_fork_revision \
      golden_shared_weights 2>&1)
rc=$?
[ $rc -eq 0 ] || { printf '%s\n' "$out"; exit 1; }
skips=$(printf '%s\n' "$out" | grep -c '^SKIP: golden_.*: ../shared/golden.* not found')
[ "$skips" -eq 3 ] || { printf '%s\n' "$out"; echo "$skips skips, not 3"; exit 1; }
[ "$(printf '%s\n' "$out" | grep -c '^ok golden_embedded_')" -eq 2 ] || exit 1
printf '%s\n' "$out" | grep -q '^ok golden_kv_decode_every_later_fork_revision$' ||
    { echo "the later revisions' decode: $out"; exit 1; }
# The whole unit suite under ASan/UBSan (leaks included) as a user runs it:
# every test that needs ../shared skips, and a skip path frees what it took.
[ -x build/tests/unit-runner-san ] || { echo "build/tests/unit-runner-san not built"; exit 1; }
# where there is no ../shared, tests/run.sh's sanitizers entry runs this very suite as a user
# does: once is enough
[ -d "${TQ_SHARED:-../shared}" ] || exit 0
san=$(TQ_SHARED=/nonexistent/shared ASAN_OPTIONS=detect_leaks=1 ./build/tests/unit-runner-san 2>&1)
rc=$?
[ $rc -eq 0 ] || { printf '%s\n' "$san" | grep -v '^ok' | tail -n 20; echo "sanitized unit tests without ../shared: exit $rc"; exit 1; }
printf '%s\n' "$san" | grep '^FAIL' && exit 1
exit 0
