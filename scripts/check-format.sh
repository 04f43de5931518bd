#!/usr/bin/env bash
# Checks (or with --fix, applies) .clang-format on the C and C++ sources. CI runs the check.
#   scripts/check-format.sh [--fix]
# clang-format 14 (Debian 12's; other versions format differently) is installed if missing.
# Not formatted: the kernel templates (templates/) and the two parameter headers embedded into
# them (include/fkv/kernel_params.h, include/fkv/decode_params.h). Their text is what NVRTC
# compiles and what the cache keys hash; they keep their layout so that a formatting change
# never changes a kernel without a GPU run. Nor the generated tables in src/config/generated/
# (written by scripts/gen-model-registry-data.py; regenerating them must not need a format pass).
set -euo pipefail
cd "$(dirname "$0")/.."
CF=$(command -v clang-format-14 || true)
if [ -z "$CF" ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq clang-format-14 >/dev/null
  CF=$(command -v clang-format-14)
fi
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.h' '*.c' '*.inc' |
  grep -v -e '^templates/' -e '^include/fkv/kernel_params\.h$' -e '^include/fkv/decode_params\.h$' \
    -e '^src/config/generated/')
if [ "${1:-}" = "--fix" ]; then
  "$CF" -i "${files[@]}"
  exit 0
fi
if ! "$CF" --dry-run --Werror "${files[@]}" 2> /tmp/fkv-format.$$; then
  grep -E "error:" /tmp/fkv-format.$$ | sed 's/: error:.*//' | sort -u | head -40 >&2
  rm -f /tmp/fkv-format.$$
  echo "check-format: the files above differ from .clang-format; run scripts/check-format.sh --fix" >&2
  exit 1
fi
rm -f /tmp/fkv-format.$$
echo "check-format: ${#files[@]} files match .clang-format"
