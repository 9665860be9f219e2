#!/bin/sh
# tests/setup_oracles.sh - the test oracles (tests/oracles.txt) in a Python
# virtual environment of their own, made once and reused: prints its bin/
# folder on stdout when it is complete, nothing when it could not be made
# (no network, no venv module); the reason goes to stderr and the oracle
# tests then skip.  The folder is $TQ_ORACLES, else a cache folder named
# after the pins: ${XDG_CACHE_HOME:-~/.cache}/tq/oracles-HASH.
cd "$(dirname "$0")/.." || exit 0
pins=tests/oracles.txt
# named after the pins and the two scripts that build them (together: llama.cpp is compiled
# once for both)
hash=$(cat "$pins" tests/setup_oracles.sh tests/setup_server.sh | sha256sum | cut -c1-12)
dir=${TQ_ORACLES:-${XDG_CACHE_HOME:-$HOME/.cache}/tq/oracles-$hash}
# the clients (tests/clients.txt) join an environment made before them, once per their pins
clients=tests/clients.txt
chash=$(sha256sum "$clients" | cut -c1-12)
add_clients() {
    [ -f "$dir/.clients-$chash" ] && return 0
    "$dir/bin/python3" -m pip --disable-pip-version-check -q install $(grep -v '^#' "$clients") >&2 &&
        touch "$dir/.clients-$chash"
}
if [ -f "$dir/.complete" ]; then
    add_clients || echo "setup_oracles: installing tests/clients.txt failed: the proxy's client tests will skip" >&2
    echo "$dir/bin"
    exit 0
fi
say() { echo "setup_oracles: $*" >&2; }
command -v python3 >/dev/null || { say "no python3: oracle tests will skip"; exit 0; }
say "creating the oracle environment in $dir (once; llama-cpp-python compiles for some minutes)"
rm -rf "$dir"
mkdir -p "$(dirname "$dir")" || exit 0
python3 -m venv "$dir" >&2 || { say "python3 -m venv failed (apt-get install python3-venv): oracle tests will skip"; rm -rf "$dir"; exit 0; }
pip="$dir/bin/python3 -m pip --disable-pip-version-check -q"
# llama.cpp without the native/AMX paths and without the multimodal library (the oracles never
# load it; llama-server's build makes its own); no wheel cache, whose wheel may be a build with
# other flags.  Without OpenSSL, as tests/setup_server.sh configures it: the common library
# this build makes takes HTTPS's define from cpp-httplib, and a change of it compiled common's
# 51 files a second time for llama-server
export CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF \
-DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAVA_BUILD=OFF -DLLAMA_OPENSSL=OFF"
# Makefiles: the build is run again later with the system's make (a ninja from build isolation is
# gone by then)
export CMAKE_GENERATOR="Unix Makefiles"
CMAKE_BUILD_PARALLEL_LEVEL=$(nproc 2>/dev/null || echo 2)
export CMAKE_BUILD_PARALLEL_LEVEL
# llama.cpp is compiled once: llama-cpp-python is built from its sdist unpacked in llama-src,
# its CMake build kept in llama-build, to which tests/setup_server.sh adds llama-server (and
# then removes both)
pin=$(grep '^llama-cpp-python==' "$pins")
if ! $pip install $(grep -v '^#' "$pins" | grep -v llama-cpp-python) >&2 ||
   ! mkdir -p "$dir/llama-src" ||
   ! $pip download --no-binary :all: --no-deps -d "$dir/llama-src" "$pin" >&2 ||
   ! tar -xzf "$dir"/llama-src/llama_cpp_python-*.tar.gz -C "$dir/llama-src" ||
   ! $pip install --no-cache-dir --config-settings=build-dir="$dir/llama-build" \
        "$dir"/llama-src/llama_cpp_python-*/ >&2; then
    say "installing the oracles failed (no network?): oracle tests will skip"
    rm -rf "$dir"
    exit 0
fi
rm -f "$dir"/llama-src/llama_cpp_python-*.tar.gz
touch "$dir/.complete"
add_clients || say "installing tests/clients.txt failed: the proxy's client tests will skip"
echo "$dir/bin"
