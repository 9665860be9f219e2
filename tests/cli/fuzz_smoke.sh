#!/bin/sh
# A short libFuzzer run of every fuzz target (the long run is `make fuzz`): 3 seconds a target
# in make test, 8 in make test-full (TQ_TEST_FULL=1).
command -v clang >/dev/null 2>&1 || { echo "clang not installed (apt-get install clang)"; exit 77; }
set -e
seconds=3
[ "${TQ_TEST_FULL:-0}" = 1 ] && seconds=8
# every target first, in parallel: they share one instrumented build of the library
targets=$(for src in tests/fuzz/*.c; do echo "build/fuzz/$(basename "$src" .c)"; done)
# shellcheck disable=SC2086
make -s -j"$(nproc 2>/dev/null || echo 2)" $targets >/dev/null
for src in tests/fuzz/*.c; do
    name=$(basename "$src" .c)
    make -s "build/fuzz/$name" >/dev/null
    mkdir -p "build/corpus/$name"
    # inputs that once failed must keep passing
    if [ -d "tests/fuzz/regressions/$name" ]; then
        "build/fuzz/$name" tests/fuzz/regressions/"$name"/* >"build/fuzz/$name.reg.log" 2>&1 ||
            { tail -n 30 "build/fuzz/$name.reg.log"; exit 1; }
    fi
    seeds=""
    [ -d "tests/fuzz/seeds/$name" ] && seeds="tests/fuzz/seeds/$name"
    "build/fuzz/$name" -max_total_time="$seconds" -max_len=16384 "build/corpus/$name" $seeds >"build/fuzz/$name.log" 2>&1 ||
        { tail -n 30 "build/fuzz/$name.log"; exit 1; }
done
