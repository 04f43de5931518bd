#!/usr/bin/env bash
# The whole benchmark in one command (docs/performance.md), for the GPU machine:
#   bench/run_all.sh BUILD_DIR [OUT_DIR]
# BUILD_DIR holds bench/fkv_bench (cmake --build BUILD_DIR --target fkv_bench); OUT_DIR
# defaults to $OUT. Runs, in order: fkv_bench (fkv-jit, C++), bench_gpu.py (Triton baseline,
# torch), report.py; writes into OUT_DIR:
#   fkv_bench.json, bench_gpu.json      raw results (partial if a step stopped early)
#   *.log                               each step's output
#   performance_tables.md, bandwidth.png   the tables and plot for docs/performance.md
#   environment.txt                     nvidia-smi, versions
# Every step runs even when an earlier one fails; the exit status is non-zero if any failed.
# LD_LIBRARY_PATH, PYTHON (default python3), FKV_BENCH_ARGS and BENCH_GPU_ARGS (extra
# arguments) come from the caller; STEP_TIMEOUT (seconds, default 240) bounds each step.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD=${1:?usage: bench/run_all.sh BUILD_DIR [OUT_DIR]}
OUT_DIR=${2:-${OUT:?usage: bench/run_all.sh BUILD_DIR [OUT_DIR] (or set OUT)}}
PY=${PYTHON:-python3}
STEP_TIMEOUT=${STEP_TIMEOUT:-240}
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)

BENCH=""
for cand in "$BUILD/bench/fkv_bench" "$BUILD/fkv_bench"; do
  [ -x "$cand" ] && BENCH=$cand && break
done
status=0
say() { echo "[run_all $(date +%H:%M:%S)] $*"; }

{
  echo "date: $(date -u +%FT%TZ)"
  echo "git: $(git -C "$HERE/.." rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "LD_LIBRARY_PATH: ${LD_LIBRARY_PATH:-}"
  nvidia-smi 2>&1 || echo "nvidia-smi unavailable"
  "$PY" -c 'import sys, torch, triton; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__, "cuda", torch.version.cuda)' 2>&1
} > "$OUT_DIR/environment.txt"

if [ -z "$BENCH" ]; then
  say "error: no fkv_bench under $BUILD (build it: cmake --build $BUILD --target fkv_bench)"
  status=1
else
  say "fkv_bench -> $OUT_DIR/fkv_bench.json"
  # shellcheck disable=SC2086
  timeout "$STEP_TIMEOUT" "$BENCH" --cases "$HERE/cases.json" --out "$OUT_DIR/fkv_bench.json" \
    ${FKV_BENCH_ARGS:-} 2>&1 | tee "$OUT_DIR/fkv_bench.log"
  rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] || { say "fkv_bench exited with $rc"; status=1; }
fi

say "bench_gpu.py -> $OUT_DIR/bench_gpu.json"
# shellcheck disable=SC2086
timeout "$STEP_TIMEOUT" "$PY" "$HERE/bench_gpu.py" --cases "$HERE/cases.json" \
  --out "$OUT_DIR/bench_gpu.json" ${BENCH_GPU_ARGS:-} 2>&1 | tee "$OUT_DIR/bench_gpu.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || { say "bench_gpu.py exited with $rc"; status=1; }

say "report.py -> $OUT_DIR/performance_tables.md, $OUT_DIR/bandwidth.png"
FKV_BENCH_RUN_COMMAND="bench/run_all.sh $*" "$PY" "$HERE/report.py" \
  --fkv "$OUT_DIR/fkv_bench.json" --gpu "$OUT_DIR/bench_gpu.json" \
  --md "$OUT_DIR/performance_tables.md" --plot "$OUT_DIR/bandwidth.png" 2>&1 | tee "$OUT_DIR/report.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || { say "report.py exited with $rc"; status=1; }

say "done (status $status); results in $OUT_DIR"
exit $status
