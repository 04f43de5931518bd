#!/usr/bin/env bash
# The main job: set up, build the fkv-jit CLI and its library (nothing else), then validate, plan
# and precompile the kernels of the bundled default config (a DFlash draft for Qwen3-4B:
# 5 layers, 8 KV heads, head_dim 128) for sm_90.
#   scripts/run-main.sh [CONFIG] [--arch sm_90 ...]
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG=${1:-tests/data/dflash-qwen3-4b-draft.json}
shift || true
ARCHS=("$@"); [ ${#ARCHS[@]} -gt 0 ] || ARCHS=(--arch sm_90)
scripts/setup.sh build --target fkv-jit
CACHE=${FKV_CACHE_DIR:-$PWD/build/kernel-cache}
echo "== fkv-jit validate $CONFIG"
build/fkv-jit validate "$CONFIG"
echo "== fkv-jit plan $CONFIG"
build/fkv-jit plan "$CONFIG"
echo "== fkv-jit precompile $CONFIG ${ARCHS[*]} --cache-dir $CACHE"
build/fkv-jit precompile "$CONFIG" "${ARCHS[@]}" --cache-dir "$CACHE"
