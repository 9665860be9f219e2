#!/bin/sh
# tests/setup_server.sh - llama-server for the server tests (issue 23), built
# once from the source distribution of the llama-cpp-python pinned in
# tests/oracles.txt (the same llama.cpp the oracle tests load), with the CPU
# flags of tests/setup_oracles.sh and no web UI (its assets come from npm or
# a download): added to the oracles' own llama.cpp build where that is still
# there (llama.cpp compiled once), else built on its own.  Prints the binary's path on stdout when it is there, nothing
# when it could not be made (no network, no cmake or C++ compiler); the
# reason goes to stderr and the server tests then skip.  The folder is
# $TQ_SERVER_DIR, else a cache folder named after the pins beside the
# oracles: ${XDG_CACHE_HOME:-~/.cache}/tq/llama-server-HASH.
cd "$(dirname "$0")/.." || exit 0
pins=tests/oracles.txt
# named after the pins and the two scripts that build them (together: llama.cpp is compiled
# once for both)
hash=$(cat "$pins" tests/setup_oracles.sh tests/setup_server.sh | sha256sum | cut -c1-12)
dir=${TQ_SERVER_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tq/llama-server-$hash}
if [ -x "$dir/llama-server" ] && [ -f "$dir/.complete" ]; then echo "$dir/llama-server"; exit 0; fi
say() { echo "setup_server: $*" >&2; }
for tool in cmake c++ python3; do
    command -v $tool >/dev/null || { say "no $tool: server tests will skip"; exit 0; }
done
pin=$(grep '^llama-cpp-python==' "$pins")
rm -rf "$dir"
mkdir -p "$dir" || exit 0
jobs=$(nproc 2>/dev/null || echo 2)
server_flags="-DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF \
-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF"
# llama.cpp compiled once: where the oracles' build is still there (tests/setup_oracles.sh), the
# server is added to it and linked to its libraries, which go beside it
oracles=$(sh tests/setup_oracles.sh 2>/dev/null)
obuild=${oracles%/bin}/llama-build
osrc=$(echo "${oracles%/bin}"/llama-src/llama_cpp_python-*)
if [ -n "$oracles" ] && [ -d "$obuild" ] && [ -d "$osrc" ]; then
    say "adding llama-server to the oracles' llama.cpp build in $obuild (once; a few minutes)"
    # shellcheck disable=SC2086
    if cmake -S "$osrc" -B "$obuild" $server_flags -DCMAKE_BUILD_RPATH='$ORIGIN' >&2 &&
       cmake --build "$obuild" --target llama-server -j "$jobs" >&2 &&
       cp "$obuild/bin/llama-server" "$dir/llama-server" &&
       cp -P "$obuild"/bin/lib*.so* "$dir/" && "$dir/llama-server" --version >/dev/null 2>&1; then
        rm -rf "$obuild" "${oracles%/bin}/llama-src"
        touch "$dir/.complete"
        echo "$dir/llama-server"
        exit 0
    fi
    say "adding llama-server to the oracles' build failed: building it on its own"
    rm -rf "$dir"
    mkdir -p "$dir" || exit 0
fi
say "building llama-server from the $pin sdist in $dir (once; some minutes)"
mkdir -p "$dir/src" || exit 0
if ! python3 -m pip --disable-pip-version-check -q download --no-binary :all: --no-deps \
        -d "$dir/src" "$pin" >&2; then
    say "downloading the $pin sdist failed (no network?): server tests will skip"
    rm -rf "$dir"
    exit 0
fi
tar -xzf "$dir"/src/llama_cpp_python-*.tar.gz -C "$dir/src" || { rm -rf "$dir"; exit 0; }
llama=$(echo "$dir"/src/llama_cpp_python-*/vendor/llama.cpp)
if ! cmake -S "$llama" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
        -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF \
        -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF \
        -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF >&2 ||
   ! cmake --build "$dir/build" --target llama-server -j "$jobs" >&2; then
    say "building llama-server failed: server tests will skip"
    rm -rf "$dir"
    exit 0
fi
cp "$dir/build/bin/llama-server" "$dir/llama-server" || { rm -rf "$dir"; exit 0; }
rm -rf "$dir/build" "$dir/src"
touch "$dir/.complete"
echo "$dir/llama-server"
