#!/usr/bin/env bash
# valgrind memcheck over the CLI paths (issue 6; CTest test `valgrind_cli`, label `valgrind`):
# validate, plan, source, precompile (one real NVRTC compile), cache ls/verify/prune/clear,
# on a few configs. Fails on any memcheck error in fkv-jit's own code or a definite leak
# (--error-exitcode=99); a command's ordinary exit status (e.g. 2 for an invalid config) is
# checked against what it should be.
#   tests/valgrind_cli.sh FKV_JIT SOURCE_DIR
set -uo pipefail
CLI=$1
SRC=$2
DATA=$SRC/tests/data
SUPP=$SRC/tests/valgrind.supp
WORK=$(mktemp -d /tmp/fkv-valgrind-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export FKV_CACHE_DIR=$WORK/cache
VG=(valgrind --tool=memcheck --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
    --show-leak-kinds=definite --track-origins=yes --suppressions="$SUPP" --quiet)
failures=0
runs=0
# run EXPECTED_STATUS ARGS...: the status must match, and 99 (memcheck) never does.
run() {
  local want=$1; shift
  runs=$((runs + 1))
  local t0=$SECONDS
  "${VG[@]}" --log-file="$WORK/vg.log" "$CLI" "$@" >"$WORK/out" 2>&1
  local got=$?
  if [ "$got" -ne "$want" ]; then
    failures=$((failures + 1))
    echo "FAIL (exit $got, expected $want): fkv-jit $*"
    tail -20 "$WORK/out"
    cat "$WORK/vg.log"
  else
    echo "ok   ($((SECONDS - t0)) s): fkv-jit $*"
  fi
}
run 0 --version
run 0 validate "$DATA/llama3.1-8b-instruct.json"
run 1 validate --explain --json "$DATA/gemma3-4b-it.json"  # strict: RoPE mismatch
run 0 validate --grouped "$DATA/qwen3.5-9b.json"
run 0 plan --json "$DATA/gemma3-4b-it.json"
run 0 plan "$DATA/gpt-oss-20b.json"
run 9 validate "$DATA/deepseek-v3.json"  # MLA: Unsupported
echo '{"num_hidden_layers": "x"' >"$WORK/broken.json"
run 2 validate "$WORK/broken.json"  # malformed JSON: BadInput
run 2 validate "$WORK/missing.json"
run 0 source --index 0 "$DATA/eagle3-llama3.1-8b-draft.json"
run 0 precompile --arch sm_90 --mode stacked -j 1 "$DATA/eagle3-llama3.1-8b-draft.json"
run 0 precompile --arch sm_90 --mode stacked -j 1 "$DATA/eagle3-llama3.1-8b-draft.json"  # cache hit
run 0 cache ls
run 0 cache verify
run 0 cache prune --max-bytes 0
run 0 cache clear
echo "$runs runs under memcheck, $failures failed"
[ "$failures" -eq 0 ]
