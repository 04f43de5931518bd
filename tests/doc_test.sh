#!/usr/bin/env bash
# Doc test: runs the shell code blocks of README.md and docs/cli.md that are marked runnable
# (a fenced block whose info string is `sh runnable`), each in a fresh bash with `set -euo
# pipefail`, from the source directory (so tests/data/... paths work), with the build's
# fkv-jit first on PATH and a private, empty cache directory. A block passes when it exits 0.
#   tests/doc_test.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
[ -x "$build/fkv-jit" ] || { echo "doc_test: no fkv-jit in $build" >&2; exit 1; }

work=$(mktemp -d /tmp/fkv-doc-test-XXXXXX)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

blocks=0
failed=0
for doc in README.md docs/cli.md; do
  # Split the runnable blocks of $doc into $work/<doc>.<n>.sh, remembering each start line.
  awk -v out="$work/$(basename "$doc")" '
    /^```sh runnable[[:space:]]*$/ { n++; file = out "." n ".sh"; print "# line " NR > file; inside = 1; next }
    inside && /^```[[:space:]]*$/ { inside = 0; close(file); next }
    inside { print > file }
  ' "$src/$doc"
  for block in "$work/$(basename "$doc")".*.sh; do
    [ -e "$block" ] || continue
    blocks=$((blocks + 1))
    cache=$(mktemp -d "$work/cache-XXXXXX")  # 0700, as the cache requires
    line=$(head -1 "$block" | cut -d' ' -f3)
    # Under pipefail, `cmd | grep -q` fails whenever grep exits before cmd has written
    # everything (cmd dies of SIGPIPE, exit 141): a race, so refuse it on every run.
    if grep -nE '\|[[:space:]]*grep[[:space:]]+(-[a-zA-Z]*q|--quiet)' "$block"; then
      echo "FAIL $doc:$line (a pipe into grep -q races under pipefail: use grep ... >/dev/null)"
      failed=$((failed + 1))
      continue
    fi
    if (cd "$src" && PATH="$build:$PATH" FKV_CACHE_DIR="$cache" FKV_CACHE_READONLY_DIRS= \
          bash -euo pipefail "$block") >"$block.log" 2>&1; then
      echo "ok   $doc:$line"
    else
      echo "FAIL $doc:$line (exit $?)"
      sed 's/^/     | /' "$block"
      echo "     output:"
      sed 's/^/     > /' "$block.log"
      failed=$((failed + 1))
    fi
  done
done
# A doc test that finds nothing to run would pass without checking anything.
if [ "$blocks" -lt 2 ]; then
  echo "doc_test: found $blocks runnable blocks; expected some in README.md and docs/cli.md" >&2
  exit 1
fi
echo "$blocks runnable blocks, $failed failed"
[ "$failed" -eq 0 ]
