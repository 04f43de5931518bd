#!/usr/bin/env bash
# Installs the build dependencies (Debian packages), configures and builds fkv-jit.
#   scripts/setup.sh [build-dir] [extra cmake args...]
# Idempotent: packages already installed are not fetched again.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
shift || true
PKGS=(cmake ninja-build g++ nlohmann-json3-dev libspdlog-dev catch2 libcli11-dev libxxhash-dev)
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
cmake -S . -B "$BUILD" -G Ninja -DCUDAToolkit_ROOT=/usr/local/cuda "$@" >/dev/null
cmake --build "$BUILD" -j "$(nproc)"
