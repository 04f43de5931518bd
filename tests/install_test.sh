#!/usr/bin/env bash
# Installs the build into a temporary prefix and builds examples/ against the installed CMake
# package (find_package(fkv), fkv::fkv), as a C++ engine would, and runs the installed CLI
# (which must find the installed library). Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
BUILD=$1
SRC=$2
TMP=$(mktemp -d /tmp/fkv-install-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
cmake --install "$BUILD" --prefix "$TMP/prefix" > "$TMP/install.log"
test -f "$TMP/prefix/include/fkv/materialize.hpp"
test -x "$TMP/prefix/bin/fkv-jit"
ls "$TMP"/prefix/lib*/cmake/fkv/fkvConfig.cmake > /dev/null
gen=(); command -v ninja > /dev/null && gen=(-G Ninja)
cmake -S "$SRC/examples" -B "$TMP/examples" "${gen[@]}" -DCMAKE_PREFIX_PATH="$TMP/prefix;${CMAKE_PREFIX_PATH:-}" \
  -DCUDAToolkit_ROOT=/usr/local/cuda > "$TMP/configure.log"
cmake --build "$TMP/examples" > "$TMP/build.log"
"$TMP/prefix/bin/fkv-jit" validate "$SRC/tests/data/dflash-qwen3-4b-draft.json" > /dev/null
echo "examples built against the installed package in $TMP/prefix"
