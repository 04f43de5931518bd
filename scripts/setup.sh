#!/usr/bin/env bash
# Installs the build dependencies (Debian packages), configures and builds fkv-jit.
#   scripts/setup.sh [build-dir] [extra cmake args...] [--target NAME ...]
# --target NAME (repeatable) builds only those targets and what they need (run-main.sh builds
# just the fkv-jit CLI and its library); without it, everything the configuration enables.
# The build type is the project's default (RelWithDebInfo, here -O2 -g1) unless a
# -DCMAKE_BUILD_TYPE is given:
# g++ 12 at -O3 (Release) reports a false -Werror=restrict in tests/gpu2/rank_worker.cpp.
# ccache (installed here) caches the compiles in ~/.ccache across build directories and clones:
# CCACHE_BASEDIR is the checkout, so its absolute paths do not enter the cache keys.
# Idempotent: packages already installed are not fetched again.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
shift || true
cmake_args=()
targets=()
while [ $# -gt 0 ]; do
  case $1 in
    --target) targets+=(--target "$2"); shift 2 ;;
    *) cmake_args+=("$1"); shift ;;
  esac
done
PKGS=(cmake ninja-build g++ ccache nlohmann-json3-dev libspdlog-dev catch2 libcli11-dev libxxhash-dev)
missing=()
for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ ! -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null; then
  echo "error: the CUDA Toolkit (NVRTC, cuda.h) is expected under /usr/local/cuda" >&2
  exit 1
fi
export PATH=/usr/local/cuda/bin:$PATH
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}  # RelWithDebInfo: the cwd would enter the key
if command -v ccache >/dev/null; then
  cmake_args=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache "${cmake_args[@]}")
fi
# -g1 (line tables, enough for backtraces, valgrind and ASan reports) instead of -g: a third
# less compile time here; a caller's own -DCMAKE_*_FLAGS_RELWITHDEBINFO comes later and wins.
cmake_args=("-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
            "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" "${cmake_args[@]}")
cmake -S . -B "$BUILD" -G Ninja -DCUDAToolkit_ROOT=/usr/local/cuda "${cmake_args[@]}" >/dev/null
cmake --build "$BUILD" -j "$(nproc)" "${targets[@]}"
