#!/bin/sh
# A user's machine has no ../shared: the golden-file tests must skip with a
# reason while the embedded compatibility vectors still run and pass.
out=$(TQ_SHARED=/nonexistent/shared ./build/tests/unit-runner golden_embedded_kv_blocks \
      golden_embedded_weight_blocks golden_shared_kv_decode golden_shared_kv_encode golden_shared_weights 2>&1)
rc=$?
printf '%s\n' "$out"
[ $rc -eq 0 ] || exit 1
[ "$(printf '%s\n' "$out" | grep -c '^SKIP: golden_shared_.*: ../shared/golden not found')" -eq 3 ] || exit 1
[ "$(printf '%s\n' "$out" | grep -c '^ok golden_embedded_')" -eq 2 ] || exit 1
