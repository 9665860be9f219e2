#!/bin/sh
# kernels/ compiled and a CUDA-enabled tq linked on a machine without a GPU:
# the default build where nvcc is on PATH, else a second build in
# build/cuda with PyPI's compiler (tests/setup_cuda.sh).  Everything that
# needs no GPU runs against it: the unit tests, the snapshot bytes (the same
# as the CPU build's), the refusal of --device cuda without a device, and
# the CLI tests of the KV pipeline.
set -u
. tests/cli/common.inc
S=tests/fuzz/seeds/fuzz_state_read/stories16.ggsq

behaviour kernels_compile_and_tq_links_with_cuda
if ./tq --version | grep -q 'cuda built'; then
    T=./tq
    U=build/tests/unit-runner
else
    nvcc=$(sh tests/setup_cuda.sh)
    [ -n "$nvcc" ] || { echo "no CUDA compiler: nvcc not on PATH and PyPI's could not be installed"; exit 77; }
    make -s -j2 B=build/cuda CUDA=1 NVCC="$nvcc" build/cuda/tq build/cuda/tests/unit-runner \
        >"$tmp/log" 2>&1 || fail "the CUDA build: $(tail -n 15 "$tmp/log")"
    T=build/cuda/tq
    U=build/cuda/tests/unit-runner
fi
$T --version | grep -q 'cuda built' || fail "$T --version: $($T --version)"

behaviour the_cuda_build_passes_the_unit_tests
out=$($U 2>&1) || fail "unit tests: $(printf '%s\n' "$out" | grep -v '^ok' | tail -n 10)"
printf '%s\n' "$out" | grep '^FAIL' && fail "unit tests failed"
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then :; else
    printf '%s\n' "$out" | grep -q '^SKIP: cuda_matches_cpu_bytes: no CUDA device' ||
        fail "the GPU test did not skip: $(printf '%s\n' "$out" | grep cuda_matches)"
fi

behaviour device_cuda_without_a_gpu_is_one_line_and_no_output
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    echo "a GPU is visible: tests/device/gpu_check.sh checks it"
else
    cpu_tq=$tq
    tq=$T # expect_err runs $tq
    expect_err 1 "no CUDA device" encode-kvdump "$S" --head-dim 8 --device cuda -o "$tmp/c.tqkv"
    tq=$cpu_tq
    [ -e "$tmp/c.tqkv" ] && fail "output written"
fi

behaviour the_cuda_build_writes_the_cpu_builds_bytes
$T encode-kvdump "$S" --head-dim 8 -o "$tmp/a.tqkv" -q || fail "encode with $T"
./tq encode-kvdump "$S" --head-dim 8 -o "$tmp/b.tqkv" -q || fail "encode with ./tq"
cmp -s "$tmp/a.tqkv" "$tmp/b.tqkv" || fail "the CUDA build's snapshot differs from the CPU build's"
$T decode-kvdump "$tmp/a.tqkv" -o "$tmp/a.ggsq" -q || fail "decode"
./tq decode-kvdump "$tmp/b.tqkv" -o "$tmp/b.ggsq" -q || fail "decode"
cmp -s "$tmp/a.ggsq" "$tmp/b.ggsq" || fail "decoded states differ"

behaviour the_kv_cli_tests_pass_with_the_cuda_build
for t in errors snapshot_source kvdump; do
    out=$(TQ=$T sh tests/cli/$t.sh 2>&1)
    rc=$?
    [ $rc -eq 0 ] || [ $rc -eq 77 ] || fail "$t with $T (exit $rc): $(printf '%s\n' "$out" | tail -n 8)"
done
exit 0
