#!/usr/bin/env bash
# The files a commit changes follow .clang-format (label cpu, runs in CI): the .cpp, .h and .cu
# files changed by the last commit (HEAD~1..HEAD, or DEEPINFER_FORMAT_BASE..HEAD) and those
# changed or added in the working tree. Older files are left as they are until a commit touches them.
# Skips with a message where there is no clang-format or no git history.
# Usage: tests/format_test.sh [SOURCE_DIR]
set -uo pipefail
cd "${1:-$(dirname "${BASH_SOURCE[0]}")/..}" || exit 2
format=$(command -v clang-format || command -v clang-format-14 || true)
if [ -z "$format" ]; then
  echo "format_test: SKIPPED: no clang-format (apt-get install clang-format)"
  exit 0
fi
base=${DEEPINFER_FORMAT_BASE:-HEAD~1}
if ! git rev-parse --verify -q "$base" >/dev/null; then
  echo "format_test: SKIPPED: no $base to compare with (a shallow or single-commit clone)"
  exit 0
fi
mapfile -t files < <( { git diff --name-only --diff-filter=ACMR "$base" HEAD; git diff --name-only --diff-filter=ACMR HEAD;
                        git ls-files --others --exclude-standard; } |
                      grep -E '\.(cpp|h|cu)$' | sort -u)
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
