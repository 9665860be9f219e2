#!/bin/sh
# tests/device/gpu_check.sh - issue 15's GPU checks as one run of the device
# tool (its 15 minutes allow one prepared run and a rerun), results under $OUT:
#   here:   make build/device/cuda-equal        (the carried fallback)
#   device: run command "sh tests/device/gpu_check.sh", carry ["build/device"], timeout_s 560
# 1. what the machine is (nvidia-smi, nvcc); 2. tq and the unit tests built
#    there with its nvcc (sm_90 code), or, where its image lacks libzstd /
#    libarchive / libxxhash headers, the carried cuda-equal alone;
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
if timeout 240 make -j16 CUDA=1 tq build/tests/unit-runner build/tests/cuda-equal >"$OUT/build.log" 2>&1; then
    say "built on the device machine"
    EQ=build/tests/cuda-equal
    timeout 120 ./build/tests/unit-runner >"$OUT/unit.txt" 2>&1; rc=$?
    say "unit tests: exit $rc, $(grep -c '^ok' "$OUT/unit.txt") ok; $(grep -i 'cuda\|FAIL' "$OUT/unit.txt" | tr '\n' ' ')"
    [ $rc -eq 0 ] || bad=1
else
    say "no build there ($(tail -n 2 "$OUT/build.log" | tr '\n' ' ')); the carried $EQ instead"
fi
timeout 300 $EQ 10000000 >"$OUT/equal.txt" 2>&1; rc=$?
say "cuda-equal, 10^7 vectors per codec: exit $rc"; cat "$OUT/equal.txt" >>"$OUT/summary.txt"
[ $rc -eq 0 ] || bad=1
if [ "$EQ" = build/tests/cuda-equal ]; then
    s=tests/fuzz/seeds/fuzz_state_read/stories16.ggsq
    ./tq encode-kvdump $s --head-dim 8 --device cpu -q -o "$OUT/cpu.tqkv" &&
        ./tq encode-kvdump $s --head-dim 8 --device cuda -q -o "$OUT/gpu.tqkv" 2>>"$OUT/summary.txt" &&
        ./tq decode-kvdump "$OUT/gpu.tqkv" --device cuda -q -o "$OUT/gpu.ggsq" 2>>"$OUT/summary.txt" &&
        ./tq decode-kvdump "$OUT/cpu.tqkv" --device cpu -q -o "$OUT/cpu.ggsq" &&
        cmp -s "$OUT/cpu.tqkv" "$OUT/gpu.tqkv" && cmp -s "$OUT/cpu.ggsq" "$OUT/gpu.ggsq"; rc=$?
    say "snapshot and decode with --device cuda equal to --device cpu: exit $rc"
    [ $rc -eq 0 ] || bad=1
fi
exit $bad
