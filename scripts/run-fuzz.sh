#!/usr/bin/env bash
# Builds and runs the libFuzzer targets in fuzz/ (docs/reliability.md).
#   scripts/run-fuzz.sh [--seconds N] [--build-dir DIR] [--no-build] [--target NAME]
# --seconds: per target (default 300). The build uses clang-14 with ASan+UBSan
# (-DFKV_SANITIZE=ON -DFKV_FUZZ=ON) in build-fuzz/. Corpora grow in DIR/fuzz/corpus/<target>
# (kept between runs); crashes go to DIR/fuzz/artifacts/ (copy them to fuzz/regressions/<target>/,
# which every run replays first). Exits 1 if any target finds a crash,
# hang (-timeout=10 s per input), leak or broken invariant. The fuzz_smoke CTest test calls
# this with --no-build --seconds 20.
# Idempotent: clang-14 and libclang-rt-14-dev are installed only when missing.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build-fuzz
SECONDS_PER_TARGET=300
DO_BUILD=1
TARGETS=(fuzz_config fuzz_cache_entry)
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) SECONDS_PER_TARGET=$2; shift 2 ;;
    --build-dir) BUILD=$2; shift 2 ;;
    --no-build) DO_BUILD=0; shift ;;
    --target) TARGETS=("$2"); shift 2 ;;
    *) echo "usage: $0 [--seconds N] [--build-dir DIR] [--no-build] [--target NAME]" >&2; exit 2 ;;
  esac
done

if [ $DO_BUILD -eq 1 ]; then
  missing=()
  for p in clang-14 libclang-rt-14-dev; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    echo "installing: ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  export PATH=/usr/local/cuda/bin:$PATH
  if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    CC=clang-14 CXX=clang++-14 cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCUDAToolkit_ROOT=/usr/local/cuda \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFKV_SANITIZE=ON -DFKV_FUZZ=ON >/dev/null
  fi
  cmake --build "$BUILD" --target "${TARGETS[@]}" -j "$(nproc)"
fi

FUZZ=$BUILD/fuzz
mkdir -p "$FUZZ/artifacts"
# intercept_tls_get_addr=0: see scripts/run-sanitized-tests.sh (LeakSanitizer's tracer crash).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:intercept_tls_get_addr=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
summary=()
for t in "${TARGETS[@]}"; do
  exe=$FUZZ/$t
  [ -x "$exe" ] || { echo "error: $exe is not built (configure with CXX=clang++ -DFKV_FUZZ=ON)" >&2; exit 1; }
  corpus=$FUZZ/corpus/$t
  mkdir -p "$corpus"
  case $t in
    fuzz_config) seeds=$ROOT/tests/data; dict=(-dict="$ROOT/fuzz/config.dict") ;;
    fuzz_cache_entry)
      seeds=$FUZZ/seeds/$t
      FKV_FUZZ_WRITE_SEEDS=$seeds "$exe" >/dev/null 2>&1
      dict=(-dict="$ROOT/fuzz/cache_entry.dict") ;;
  esac
  log=$FUZZ/$t.log
  echo "== $t: ${SECONDS_PER_TARGET} s, corpus $corpus, seeds $seeds"
  rc=0
  "$exe" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
    -print_final_stats=1 -artifact_prefix="$FUZZ/artifacts/$t-" "${dict[@]}" "$corpus" "$seeds" "$ROOT/fuzz/regressions/$t" >"$log" 2>&1 || rc=$?
  done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 || true)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  if [ $rc -ne 0 ]; then
    status=1
    echo "FAILED: $t exited $rc; last lines of $log:"
    tail -40 "$log"
    summary+=("$t: FAILED (exit $rc), see $log and $FUZZ/artifacts/")
  else
    summary+=("$t: ${execs:-?} executions, ${rate:-?} exec/s, ${done_line#*DONE }")
  fi
done
echo "== summary"
printf '%s\n' "${summary[@]}"
exit $status
