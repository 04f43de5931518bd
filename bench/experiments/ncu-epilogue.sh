#!/usr/bin/env bash
# Nsight Compute on the epilogue kernel (docs/performance.md, "Third sweep"): occupancy,
# throughput and stall reasons of the stacked launch of each case, on the GPU machine after
# `STEPS=build scripts/gpu-run.sh`:
#   bench/experiments/ncu-epilogue.sh [OUT_DIR] [CASE...]
# The clocks are left alone (--clock-control none); ncu flushes the caches before the profiled
# launch, so its durations are cold-cache figures, above fkv_bench's graph replays.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT_DIR=${1:-${OUT:-/tmp/fkv-ncu}}
shift || true
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(d128_h8_l5_t4096 d256_h4_l5_t4096 d128_h8_l1_t4096 d128_h8_l5_t512)
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
mkdir -p "$OUT_DIR"
for c in "${cases[@]}"; do
  FKV_CACHE_DIR=$PWD/build-gpu/kcache timeout 120 ncu --clock-control none \
    -k regex:fused_kv_materialize --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    build-gpu/bench/fkv_bench --only "$c" --skip-compile --skip-host --out "$OUT_DIR/ncu_$c.json" \
    > "$OUT_DIR/ncu_$c.txt" 2>&1
  echo "== $c"
  grep -E "Duration|DRAM Throughput|Achieved Occupancy|Registers Per|No Eligible|Issued Warp" \
    "$OUT_DIR/ncu_$c.txt" | head -12
  grep -E "stalled" "$OUT_DIR/ncu_$c.txt" | awk '$NF+0 > 0.05' | sort -k3 -n -r | head -8
done
