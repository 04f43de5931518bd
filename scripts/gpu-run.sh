#!/usr/bin/env bash
# Everything that needs a GPU, in one command, for the lent H200 machine (no package access:
# the Debian dev packages travel in .deps/, made by shared/device/prepare-deps.sh).
#   STEPS=build,test,sanitize,bench[,gpu2,python,decode,sweep,extras] scripts/gpu-run.sh [OUT_DIR]
# Logs and results go to OUT_DIR (default $OUT), packed into OUT_DIR/results.tar.gz as well.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=${1:-${OUT:-/tmp/fkv-gpu-out}}
STEPS=${STEPS:-build,test,sanitize,bench}
BUILD=${BUILD:-build-gpu}
mkdir -p "$OUT_DIR/logs"
LOG=$OUT_DIR/logs
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
has() { [[ ",$STEPS," == *",$1,"* ]]; }
say() { echo "[gpu-run $(date +%H:%M:%S)] $*"; }
status=0

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$LOG/gpu.txt" 2>&1

if has build; then
  say "configure + build ($BUILD)"
  if ! { cmake -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
           -DCUDAToolkit_ROOT=/usr/local/cuda && cmake --build "$BUILD" -j "$(nproc)"; } > "$LOG/build.log" 2>&1; then
    tail -40 "$LOG/build.log"; say "build failed"; exit 1
  fi
fi

if has test; then
  say "ctest -L gpu"
  (cd "$BUILD" && FKV_CACHE_DIR=$PWD/kcache ctest -L '^gpu$' -E test_python_gpu ${CTEST_ARGS:-} --output-on-failure --timeout 400) > "$LOG/ctest-gpu.log" 2>&1 || status=1
  grep -E "tests passed|Passed|Failed|\*\*\*" "$LOG/ctest-gpu.log" | tail -12
fi

if has gpu2; then
  say "ctest -L gpu2 (two devices)"
  (cd "$BUILD" && ctest -L '^gpu2$' -V --timeout 400) > "$LOG/ctest-gpu2.log" 2>&1 || status=1
  grep -E "rank [0-9]|storm|mismatch|tests passed|Failed|\*\*\*" "$LOG/ctest-gpu2.log" | tail -20
fi

# The wheel built here (scripts/test-wheel.sh -> dist/) and the apache-tvm-ffi wheel (.whl/),
# installed with --target into one folder (the machine has no package index); torch comes from
# the system Python.
PYDIR=$PWD/$BUILD-pyenv
install_wheel() {
  [ -d "$PYDIR/fkv_jit" ] && return 0
  python3 -m pip install -q --no-index --no-deps --target "$PYDIR" .whl/apache_tvm_ffi-*.whl dist/fkv_jit-*.whl
}
# pyrun SECONDS SCRIPT ARGS...: the system Python with the installed wheel, under a time limit.
pyrun() { local limit=$1; shift; PYTHONPATH=$PYDIR FKV_CACHE_DIR=$PWD/$BUILD/kcache timeout "$limit" python3 -X faulthandler "$@"; }

if has python; then
  say "python GPU tests of the installed wheel"
  install_wheel > "$LOG/python-install.log" 2>&1 || { tail -5 "$LOG/python-install.log"; status=1; }
  for t in tests/gpu/test_python_gpu.py ${PY_TESTS:-}; do
    pyrun 300 "$t" > "$LOG/$(basename "$t" .py).log" 2>&1 || status=1
    tail -15 "$LOG/$(basename "$t" .py).log"
  done
fi

if has sanitize; then
  for tool in memcheck racecheck initcheck; do
    say "compute-sanitizer --tool $tool"
    FKV_CACHE_DIR=$PWD/$BUILD/kcache FKV_TEST_CASES=${SAN_CASES:-12} \
      timeout 300 compute-sanitizer --tool "$tool" --error-exitcode 9 \
      "$BUILD/tests/test_materialize_gpu" "~[large]" > "$LOG/sanitizer-$tool.log" 2>&1
    rc=$?; say "$tool exit $rc"; [ $rc -eq 0 ] || status=1
    tail -3 "$LOG/sanitizer-$tool.log"
  done
fi

if has bench; then
  say "benchmark"
  FKV_CACHE_DIR=$PWD/$BUILD/kcache bench/run_all.sh "$BUILD" "$OUT_DIR/bench" > "$LOG/bench.log" 2>&1 || status=1
  tail -5 "$LOG/bench.log"
  [ -f "$OUT_DIR/bench/performance_tables.md" ] && cat "$OUT_DIR/bench/performance_tables.md" | head -80
fi

if has decode; then
  say "decode-size fused kernel: GPU test and benchmark"
  FKV_CACHE_DIR=$PWD/$BUILD/kcache timeout 300 "$BUILD/tests/test_decode_gpu" > "$LOG/decode-gpu.log" 2>&1 || status=1
  tail -4 "$LOG/decode-gpu.log"
  FKV_CACHE_DIR=$PWD/$BUILD/kcache timeout 300 "$BUILD/bench/decode_bench" --out "$OUT_DIR/decode_bench.json" \
    > "$LOG/decode-bench.log" 2>&1 || status=1
  tail -30 "$LOG/decode-bench.log"
fi

if has sweep; then
  # Tuning sweep: layers per block, block size, loads per lane and template variants on the cases
  # that matter most (SWEEP="default loads2 warps4 ..." picks the settings).
  say "tuning sweep"
  cases=${SWEEP_CASES:-d128_h8_l5_t512,d128_h8_l5_t4096,d128_h8_l1_t4096,d80_r32_h32_l5_t4096,d256_h4_l5_t4096,d64_h8_l5_t4096}
  files=()
  # A setting is one knob or several joined by '+' (lpb5+loads2); tpl:DIR reads the kernel
  # templates from DIR (FKV_TEMPLATE_DIR: a kernel experiment, no rebuild; see
  # bench/experiments/variants.py). No register-cap setting: ptxas ignores --maxrregcount for a
  # kernel with __launch_bounds__ (variants.py's mb<N> sets a minimum of blocks per SM instead).
  for setting in ${SWEEP:-default lpb1 lpb5 loads2 warps4}; do
    env=(FKV_NONE=1)
    IFS=+ read -ra parts <<< "$setting"
    for part in "${parts[@]}"; do
      case $part in
        warps*) env+=(FKV_BLOCK_WARPS=${part#warps});;
        lpb*) env+=(FKV_LAYERS_PER_BLOCK=${part#lpb});;
        loads*) env+=(FKV_LOADS_PER_LANE=${part#loads});;
        tpl:*) env+=(FKV_TEMPLATE_DIR=$PWD/${part#tpl:});;
      esac
    done
    file=sweep_${setting//[:\/+]/_}
    env "${env[@]}" FKV_CACHE_DIR=$PWD/$BUILD/kcache timeout 120 "$BUILD/bench/fkv_bench" --only "$cases" \
      --skip-compile --skip-host --tag "$setting" --out "$OUT_DIR/$file.json" > "$LOG/$file.log" 2>&1
    files+=(--fkv "$OUT_DIR/$file.json")
    grep -v "^\[" "$LOG/$file.log" | head -8
  done
  python3 bench/report.py "${files[@]}" --md "$OUT_DIR/sweep.md" > "$LOG/sweep_report.log" 2>&1
  sed -n '/Tuning sweep/,$p' "$OUT_DIR/sweep.md" | head -20
fi

if has extras; then
  # The CLI's GPU commands, the end-to-end benchmark, and the two embedding examples.
  cfg=tests/data/dflash-qwen3-4b-draft.json
  export FKV_CACHE_DIR=$PWD/$BUILD/kcache
  say "fkv-jit selftest"; timeout 120 "$BUILD/fkv-jit" selftest "$cfg" > "$LOG/selftest.log" 2>&1 || status=1
  tail -6 "$LOG/selftest.log"
  timeout 120 "$BUILD/fkv-jit" selftest tests/data/smollm3-3b.json --kv-dtype fp8_e4m3 --tokens 333 >> "$LOG/selftest.log" 2>&1 || status=1
  tail -5 "$LOG/selftest.log"
  say "fkv-jit bench"; timeout 120 "$BUILD/fkv-jit" bench "$cfg" > "$LOG/cli-bench.log" 2>&1 || status=1
  cat "$LOG/cli-bench.log"
  say "C++ example"
  { cmake -S . -B "$BUILD" -DFKV_BUILD_EXAMPLES=ON > /dev/null && cmake --build "$BUILD" --target embed_cpp -j "$(nproc)" > /dev/null &&
    timeout 120 "$BUILD/examples/embed_cpp" "$cfg"; } > "$LOG/example-cpp.log" 2>&1 || status=1
  tail -8 "$LOG/example-cpp.log"
  say "Python example"
  install_wheel > "$LOG/python-install.log" 2>&1
  pyrun 120 examples/python_example.py "$cfg" > "$LOG/example-py.log" 2>&1 || status=1
  tail -8 "$LOG/example-py.log"
  say "end-to-end benchmark"
  pyrun 240 bench/e2e_bench.py --out "$OUT_DIR/e2e.json" --md "$OUT_DIR/e2e.md" > "$LOG/e2e.log" 2>&1 || status=1
  tail -20 "$LOG/e2e.log"
fi

tar -C "$OUT_DIR" -czf /tmp/results.tar.gz --exclude results.tar.gz . && mv /tmp/results.tar.gz "$OUT_DIR/results.tar.gz"
say "done, status $status"
exit $status
