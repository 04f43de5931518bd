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
# Only the public headers: include/fkv/ of the source tree plus the generated build_version.h.
# Internal headers (src/) and the float64 reference (support/, a test oracle) are not installed.
expected=$( (cd "$SRC/include/fkv" && ls; echo build_version.h) | sort)
installed=$(cd "$TMP/prefix/include/fkv" && ls | sort)
if [ "$installed" != "$expected" ]; then
  echo "install_test: the installed headers differ from include/fkv/ + build_version.h:" >&2
  diff <(echo "$expected") <(echo "$installed") >&2 || true
  exit 1
fi
# libfkv carries no part of the reference (it lives in the fkv_reference library).
lib=$(ls "$TMP"/prefix/lib*/libfkv.so)
if command -v nm > /dev/null && nm -DC --defined-only "$lib" | grep -E 'fkv::(reference_[kv]|compare)\('; then
  echo "install_test: $lib exports the float64 reference (above); link it from fkv_reference" >&2
  exit 1
fi
ls "$TMP"/prefix/lib*/cmake/fkv/fkvConfig.cmake > /dev/null
gen=(); command -v ninja > /dev/null && gen=(-G Ninja)
cmake -S "$SRC/examples" -B "$TMP/examples" "${gen[@]}" -DCMAKE_PREFIX_PATH="$TMP/prefix;${CMAKE_PREFIX_PATH:-}" \
  -DCUDAToolkit_ROOT=/usr/local/cuda > "$TMP/configure.log"
cmake --build "$TMP/examples" > "$TMP/build.log"
"$TMP/prefix/bin/fkv-jit" validate "$SRC/tests/data/dflash-qwen3-4b-draft.json" > /dev/null
echo "examples built against the installed package in $TMP/prefix"
