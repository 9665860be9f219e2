#!/bin/sh
# tests/setup_cuda.sh - prints the path of a CUDA compiler for the CUDA build
# make test checks: nvcc on PATH, else PyPI's (tests/cuda_toolchain.txt)
# installed once into ${XDG_CACHE_HOME:-~/.cache}/tq/cuda-HASH ($TQ_CUDA to
# choose); nothing, and the reason on stderr, when neither can be had (no
# network): the CUDA build test then skips.
cd "$(dirname "$0")/.." || exit 0
say() { echo "setup_cuda: $*" >&2; }
if [ "${TQ_CUDA_FROM_PYPI:-0}" != 1 ] && command -v nvcc >/dev/null; then command -v nvcc; exit 0; fi
pins=tests/cuda_toolchain.txt
hash=$(sha256sum "$pins" | cut -c1-12)
dir=${TQ_CUDA:-${XDG_CACHE_HOME:-$HOME/.cache}/tq/cuda-$hash}
nvcc=$dir/nvidia/cu13/bin/nvcc
if [ -f "$dir/.complete" ] && [ -x "$nvcc" ]; then echo "$nvcc"; exit 0; fi
# pip: the system's, else the oracle environment's (tests/setup_oracles.sh)
pip=""
if python3 -m pip --version >/dev/null 2>&1; then pip="python3 -m pip"; fi
if [ -z "$pip" ]; then
    ob=$(sh tests/setup_oracles.sh 2>/dev/null)
    [ -n "$ob" ] && [ -x "$ob/python3" ] && pip="$ob/python3 -m pip"
fi
[ -n "$pip" ] || { say "no pip (apt-get install python3-pip): the CUDA build test skips"; exit 0; }
say "installing NVIDIA's CUDA compiler from PyPI into $dir (once, about 300 MB)"
rm -rf "$dir"
mkdir -p "$dir" || exit 0
# shellcheck disable=SC2046
if ! $pip install --disable-pip-version-check -q --no-deps --target "$dir" \
        $(grep -v '^#' "$pins") >&2 || [ ! -x "$nvcc" ]; then
    say "installing the CUDA compiler failed (no network?): the CUDA build test skips"
    rm -rf "$dir"
    exit 0
fi
touch "$dir/.complete"
echo "$nvcc"
