#!/bin/sh
# tests/device/gpu_check.sh - issue 15's GPU checks as one run of the device
# tool (its 15 minutes allow one prepared run and a rerun), results under $OUT:
#   here:   make device-bundle   (tq, the unit tests and cuda-equal built with
#           CUDA here, and the shared libraries tq needs, in build/device)
#   device: run command "sh tests/device/gpu_check.sh", carry ["build/device"], timeout_s 560
# 1. what the machine is (nvidia-smi, nvcc); 2. the carried binaries (a build
#    there with its nvcc only where none was carried);
# 3. the unit tests (cuda_matches_cpu_bytes: every tq group and width and the
#    fork's turbo blocks, bytes and floats against the CPU);
# 4. cuda-equal: 10^7 vectors per KV codec, every byte and float compared,
#    with the host-data throughput of each side;
# 5. a snapshot with --device cuda against --device cpu, byte for byte.
# Exit 0 when every check that ran passed.
set -u
OUT=${OUT:-build/gpu-check}
mkdir -p "$OUT"
bad=0
say() { echo "$*" | tee -a "$OUT/summary.txt"; }
nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1; say "nvidia-smi: exit $?"
nvcc --version >"$OUT/nvcc.txt" 2>&1; say "nvcc: exit $?"
EQ=build/device/cuda-equal
TQ=./tq
UNIT=./build/tests/unit-runner
if [ -x build/device/tq ] && [ -x build/device/unit-runner ]; then
    export LD_LIBRARY_PATH=build/device/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    TQ=build/device/tq
    UNIT=build/device/unit-runner
    say "carried binaries: $($TQ --version)"
elif timeout 240 make -j16 CUDA=1 tq build/tests/unit-runner build/tests/cuda-equal >"$OUT/build.log" 2>&1; then
    say "built on the device machine"
    EQ=build/tests/cuda-equal
else
    UNIT=
    say "no build there ($(tail -n 2 "$OUT/build.log" | tr '\n' ' ')); the carried $EQ alone"
fi
if [ -n "$UNIT" ]; then
    timeout 120 $UNIT >"$OUT/unit.txt" 2>&1; rc=$?
    say "unit tests: exit $rc, $(grep -c '^ok' "$OUT/unit.txt") ok; $(grep -i 'cuda\|FAIL' "$OUT/unit.txt" | tr '\n' ' ')"
    [ $rc -eq 0 ] || bad=1
fi
timeout 300 $EQ 10000000 >"$OUT/equal.txt" 2>&1; rc=$?
say "cuda-equal, 10^7 vectors per codec: exit $rc"; cat "$OUT/equal.txt" >>"$OUT/summary.txt"
[ $rc -eq 0 ] || bad=1
if [ -n "$UNIT" ]; then
    s=tests/fuzz/seeds/fuzz_state_read/stories16.ggsq
    $TQ encode-kvdump $s --head-dim 8 --device cpu -q -o "$OUT/cpu.tqkv" &&
        $TQ encode-kvdump $s --head-dim 8 --device cuda -q -o "$OUT/gpu.tqkv" 2>>"$OUT/summary.txt" &&
        $TQ decode-kvdump "$OUT/gpu.tqkv" --device cuda -q -o "$OUT/gpu.ggsq" 2>>"$OUT/summary.txt" &&
        $TQ decode-kvdump "$OUT/cpu.tqkv" --device cpu -q -o "$OUT/cpu.ggsq" &&
        cmp -s "$OUT/cpu.tqkv" "$OUT/gpu.tqkv" && cmp -s "$OUT/cpu.ggsq" "$OUT/gpu.ggsq"; rc=$?
    say "snapshot and decode with --device cuda equal to --device cpu: exit $rc"
    [ $rc -eq 0 ] || bad=1
fi
exit $bad
