#!/usr/bin/env bash
# The files a commit changes follow .clang-format (label cpu, runs in CI): the .cpp, .h, .cu and
# .cuh files changed by the last commit (HEAD~1..HEAD, or DEEPINFER_FORMAT_BASE..HEAD for a range
# of commits) and those changed or added in the working tree. clang-format 14 (the version the
# style was fixed with; launch/test.sh installs it). Exits 77, which ctest reports as skipped,
# where there is no clang-format 14 or no parent commit.
# Usage: tests/format_test.sh [SOURCE_DIR]
set -uo pipefail
cd "${1:-$(dirname "${BASH_SOURCE[0]}")/..}" || exit 2
format=$(command -v clang-format-14 || true)
if [ -z "$format" ] && command -v clang-format >/dev/null && clang-format --version | grep -q 'version 14\.'; then format=$(command -v clang-format); fi
if [ -z "$format" ]; then
  echo "format_test: SKIPPED: no clang-format 14 (apt-get install clang-format-14)"
  exit 77
fi
base=${DEEPINFER_FORMAT_BASE:-HEAD~1}
if ! git rev-parse --verify -q "$base" >/dev/null; then
  echo "format_test: SKIPPED: no $base to compare with (a shallow or single-commit clone)"
  exit 77
fi
mapfile -t files < <( { git diff --name-only --diff-filter=ACMR "$base" HEAD; git diff --name-only --diff-filter=ACMR HEAD;
                        git ls-files --others --exclude-standard; } |
                      grep -E '\.(cpp|h|cu|cuh)$' | sort -u)
failed=0
for f in "${files[@]}"; do
  [ -f "$f" ] || continue
  if ! "$format" --style=file --dry-run -Werror "$f" >/dev/null 2>&1; then
    echo "format_test: $f does not follow .clang-format (run: clang-format -i $f)" >&2
    failed=1
  fi
done
[ $failed -eq 0 ] && echo "format_test: ok (${#files[@]} files changed since $base)"
exit $failed
