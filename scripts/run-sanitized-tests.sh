#!/usr/bin/env bash
# The CPU test suite under AddressSanitizer + UndefinedBehaviorSanitizer (issue 6).
#   scripts/run-sanitized-tests.sh [build-dir]      (default build-asan)
# Configures DIR with -DFKV_SANITIZE=ON (g++) and without the GPU tests and benchmarks (nothing
# here runs them; the plain build compiles them), builds, runs ctest -LE "gpu|fuzz|valgrind"
# (valgrind does not run ASan binaries; tests/valgrind_cli.sh runs in a plain build). Compiles go
# through ccache when it is installed (scripts/setup.sh installs it).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-asan}
export PATH=/usr/local/cuda/bin:$PATH
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$ROOT}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# g++ 12's -Wmaybe-uninitialized misfires inside std::regex/std::function under -fsanitize=address
# (tests/test_validate.cpp stops the build with -Werror); the sanitizers check the real thing.
# -O1 -g1, ASan's usual level: at -O2 -g the instrumented test files took up to 146 s each to
# compile here (the whole build 14 min); -O1 -g1 halves that, and the reports keep file:line.
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCUDAToolkit_ROOT=/usr/local/cuda -DFKV_SANITIZE=ON \
  -DFKV_BUILD_GPU_TESTS=OFF -DFKV_BUILD_BENCH=OFF "${launcher[@]}" \
  -DCMAKE_CXX_FLAGS="-Wno-error=maybe-uninitialized" \
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" >/dev/null
cmake --build "$BUILD" -j "$(nproc)"
# Leaks are errors; libnvrtc is not instrumented, so ASan must tolerate its allocations.
# intercept_tls_get_addr=0: g++ <= 13's runtime takes a dynamic TLS block at an address = 16
# (mod 4096) for a glibc <= 2.18 header and reads the words before it; libnvrtc (dlopen'd, with a
# TLS segment, used from the decode kernels' compile threads) gets such blocks by chance, and
# LeakSanitizer's tracer then dies at exit ("Tracer caught signal 11": CI, test_decode, once).
# Dynamic TLS blocks are heap blocks reachable from the thread's DTV, so leaks are still found.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:intercept_tls_get_addr=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$BUILD"
# test_python runs the interpreter, which cannot load an ASan-instrumented library without
# preloading the ASan runtime; it runs in the plain build.
ctest -LE "gpu|fuzz|valgrind" -E "^test_python$|^install_examples$" --output-on-failure -j "$(nproc)"
