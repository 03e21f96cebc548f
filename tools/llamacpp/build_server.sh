#!/usr/bin/env bash
# Build (or reuse) llama.cpp's `llama-server` for zerohop's llamacpp tier (tests/llamacpp).
#
# Usage: tools/llamacpp/build_server.sh [CACHE_DIR]
#   CACHE_DIR defaults to ${ZEROHOP_CACHE:-$HOME/.cache/zerohop}/llama.cpp-$VERSION, a
#   cache that survives between CI runs on the same machine; the server ends up at
#   CACHE_DIR/bin/llama-server.
#
# Where the sources come from: PyPI's llama-cpp-python sdist carries llama.cpp under
# vendor/llama.cpp (its tools/server included), and PyPI is reachable where a git host is
# not. Only the `llama-server` target is built, statically linked against llama.cpp's
# own libraries (BUILD_SHARED_LIBS=OFF), so the binary can sit alone in CACHE_DIR/bin.
# GGML_NATIVE=OFF: the cache may move to another machine of the same kind, whose CPU
# may lack this one's instruction set extensions (AVX512 vs AVX2, seen here).
# About 7-10 minutes on 2 cores; a warm run checks `llama-server --version` and stops.
#
# ZEROHOP_LLAMACPP_PREBUILT=DIR: a folder laid out as CACHE_DIR (DIR/bin/llama-server and
# its marker), made by this script elsewhere. When its marker is this script's own, the
# binary is copied into CACHE_DIR (DIR may be read-only) and used if it runs; otherwise
# the server is built as usual. CI points it at its build cache; a user's machine has none.
set -euo pipefail

readonly LLAMA_CPP_PYTHON_VERSION="0.3.36"
readonly SDIST="llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION"
readonly CMAKE_FLAGS=(
  -G Ninja
  -DCMAKE_BUILD_TYPE=Release
  -DBUILD_SHARED_LIBS=OFF
  -DLLAMA_CURL=OFF
  -DLLAMA_BUILD_TESTS=OFF
  -DLLAMA_BUILD_EXAMPLES=OFF
  -DLLAMA_BUILD_SERVER=ON
  -DGGML_NATIVE=OFF
)

cache_root="${ZEROHOP_CACHE:-$HOME/.cache/zerohop}"
cache_dir="${1:-$cache_root/llama.cpp-$LLAMA_CPP_PYTHON_VERSION}"
server="$cache_dir/bin/llama-server"
python="${ZEROHOP_LLAMACPP_PYTHON:-python3}"
jobs="${ZEROHOP_BUILD_JOBS:-$(nproc)}"
started_s=$(date +%s.%N)

elapsed() {
  awk -v start="$started_s" -v now="$(date +%s.%N)" 'BEGIN { printf "%.1f", now - start }'
}

# The marker names what the binary was built from and how: a changed pin or flag rebuilds.
marker="$cache_dir/bin/.zerohop-build"
expected_marker="llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION ${CMAKE_FLAGS[*]}"

server_runs() {
  [[ -x "$server" && -f "$marker" && "$(cat "$marker")" == "$expected_marker" ]] \
    && "$server" --version >/dev/null 2>&1
}

if server_runs; then
  echo "llama-server ready at $server (cached; $(elapsed) s)"
  exit 0
fi

mkdir -p "$cache_dir"
# Two callers (the CI step and a test session) must not build into one folder at once.
exec 9>"$cache_dir.lock"
flock 9
if server_runs; then
  echo "llama-server ready at $server (built by another process; $(elapsed) s)"
  exit 0
fi

prebuilt="${ZEROHOP_LLAMACPP_PREBUILT:-}"
if [[ -n "$prebuilt" && -f "$prebuilt/bin/.zerohop-build" ]]; then
  if [[ "$(cat "$prebuilt/bin/.zerohop-build")" == "$expected_marker" ]]; then
    mkdir -p "$cache_dir/bin"
    cp "$prebuilt/bin/llama-server" "$server.tmp" && chmod u+wx "$server.tmp" \
      && mv "$server.tmp" "$server" && printf '%s' "$expected_marker" >"$marker"
    if server_runs; then
      echo "llama-server ready at $server (copied from $prebuilt; $(elapsed) s)"
      exit 0
    fi
    echo "the prebuilt llama-server in $prebuilt does not run here: building"
    rm -f "$server" "$marker"
  else
    echo "the prebuilt llama-server in $prebuilt was built otherwise (its marker differs): building"
  fi
fi

for tool in cmake ninja c++; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "error: '$tool' not found (Debian: apt-get install cmake ninja-build g++)" >&2
    exit 1
  fi
done

tarball="$cache_dir/$SDIST.tar.gz"
if [[ ! -f "$tarball" ]]; then
  echo "downloading the llama-cpp-python $LLAMA_CPP_PYTHON_VERSION sdist"
  "$python" -m pip download --disable-pip-version-check --quiet --no-deps --no-binary :all: \
    "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -d "$cache_dir/download"
  mv "$cache_dir/download/$SDIST.tar.gz" "$tarball"
  rm -rf "$cache_dir/download"
fi

source_dir="$cache_dir/$SDIST/vendor/llama.cpp"
if [[ ! -f "$source_dir/tools/server/CMakeLists.txt" ]]; then
  echo "unpacking $tarball"
  rm -rf "$cache_dir/$SDIST"
  tar -xzf "$tarball" -C "$cache_dir"
fi

build_dir="$cache_dir/build"
log="$cache_dir/build.log"
echo "building llama-server with $jobs jobs (log $log)"
if ! { cmake -S "$source_dir" -B "$build_dir" "${CMAKE_FLAGS[@]}" \
       && cmake --build "$build_dir" --target llama-server -j "$jobs"; } >"$log" 2>&1; then
  echo "error: the build failed; last lines of $log:" >&2
  tail -n 30 "$log" >&2
  exit 1
fi
mkdir -p "$cache_dir/bin"
cp "$build_dir/bin/llama-server" "$server.tmp"
mv "$server.tmp" "$server"
printf '%s' "$expected_marker" >"$marker"
if ! server_runs; then
  echo "error: $server does not run:" >&2
  "$server" --version >&2 || true
  exit 1
fi
"$server" --version 2>&1 | head -n 1
# The binary stands alone: the sources and objects (about 300 MB) are not kept; the
# sdist is, so a changed flag rebuilds without downloading again.
rm -rf "$build_dir" "${cache_dir:?}/$SDIST"
echo "llama-server ready at $server (built in $(elapsed) s)"
