#!/usr/bin/env bash
# The README's "What is where" table names every public header, test-support source
# (support/), kernel template, Python module, script and doc: a file added without a row there
# fails this test.
#   tests/readme_map_test.sh SOURCE_DIR
set -uo pipefail
src=$(cd "$1" && pwd)
section=$(awk '/^## What is where/ {on = 1; next} /^## / {on = 0} on' "$src/README.md")
[ -n "$section" ] || { echo "readme_map_test: no 'What is where' section in README.md" >&2; exit 1; }
missing=0
checked=0
for f in "$src"/include/fkv/* "$src"/support/* "$src"/templates/* "$src"/python/fkv_jit/*.py \
         "$src"/scripts/* "$src"/docs/*.md; do
  name=$(basename "$f")
  stem=${name%.*}
  case $name in __init__.py | __main__.py) continue ;; esac
  checked=$((checked + 1))
  # Named as `stem`, `name`, or inside a backquoted list (`a`, `b`).
  if ! grep -qE "\`($stem|$name)\`" <<<"$section"; then
    echo "README.md 'What is where' does not name ${f#$src/}"
    missing=$((missing + 1))
  fi
done
echo "$checked files checked, $missing missing"
[ "$checked" -gt 40 ] && [ "$missing" -eq 0 ]
