#!/usr/bin/env bash
# Set up, build and run the test suite without a GPU (tests labelled `gpu` are skipped; the GPU
# tests are compiled all the same, so that they keep compiling).
#   scripts/run-tests.sh [build-dir] [extra cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
shift || true
scripts/setup.sh "$BUILD" "$@"
cd "$BUILD"
ctest -LE gpu --output-on-failure -j "$(nproc)" --timeout 900
