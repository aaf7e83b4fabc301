#!/usr/bin/env bash
# Checks (or with --fix, applies) .clang-format on every C, C++ and CUDA source of the project.
# CI runs the check first: a file off the style fails the run with the list of offenders.
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG_FORMAT=${CLANG_FORMAT:-clang-format}
mapfile -t files < <(git ls-files 'src/**' 'tests/**' 'bench/**' 'sdk/**' 'inferlets/**' 'clients/**' |
  grep -E '\.(c|cc|cpp|h|hpp|cu|cuh)$' | grep -v '^tests/data/')
if [ "${1:-}" = "--fix" ]; then
  "$CLANG_FORMAT" -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$CLANG_FORMAT" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "check-format: ${#bad[@]} file(s) differ from .clang-format (fix: scripts/check-format.sh --fix):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "check-format: ${#files[@]} files follow .clang-format"
