#!/usr/bin/env bash
# Structure rules that a review would otherwise have to catch (label cpu, runs in CI):
#  1. CUDA is chosen at run time, in CUDA folders: no `#if` on a CUDA or NCCL macro outside
#     */cuda/ and the LibTorch compatibility header (style.md "Kernels and devices").
#  2. One official forward: no layer file in model/ names numerics; the transformers arithmetic
#     lives in model/reference/ (model/arithmetic.h).
#  3. No function in pipeline/ or launch/ longer than 60 lines, from its first line at column 0
#     (a wrapped signature included) to the line that is exactly '}'.
# That every .cu file is built is checked by CMake itself (deepinfer_cuda_kernels, top-level
# CMakeLists.txt), in the CPU build's compile-only check as in the CUDA build.
# Usage: tests/structure_test.sh [SOURCE_DIR]
set -uo pipefail
cd "${1:-$(dirname "${BASH_SOURCE[0]}")/..}" || exit 2
failed=0
fail() { echo "structure_test: $*" >&2; failed=1; }

# The repository's files matching the patterns (git's list; without git, find with the same patterns).
sources() {
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -co --exclude-standard -- "$@"
    return
  fi
  local p args=()
  for p in "$@"; do args+=(-o -path "./$p"); done
  find . \( -path ./build -o -path './build-*' -o -path ./.git -o -path ./.deps \) -prune -o -type f \( -false "${args[@]}" \) -print | sed 's|^\./||'
}

while IFS= read -r hit; do
  fail "#if on CUDA outside a cuda/ folder: $hit"
done < <(sources '*.cpp' '*.h' '*.cu' '*.cuh' | grep -v -e '/cuda/' -e '^model/torch_compat.h$' |
         xargs -r grep -nHE '^\s*#\s*(if|ifdef|ifndef|elif).*(CUDA|NCCL)')

while IFS= read -r hit; do
  fail "a layer file names numerics (use model/arithmetic.h; the transformers one is model/reference/): $hit"
done < <(ls model/*.cpp model/*.h | xargs -r grep -niH 'numerics')

for f in $(sources 'pipeline/*.cpp' 'launch/*.cpp'); do
  awk -v file="$f" '
    /^};/ { start = 0; body = 0; next }                           # a struct or an initializer ends
    /^}[ \t]*$/ { if (start && body && NR - start + 1 > 60) printf "%s:%d: %d lines: %s\n", file, start, NR - start + 1, name
                  start = 0; body = 0; next }
    /^(namespace|using|extern|struct|class|enum|union|template)([ \t<]|$)/ { next }
    /^[^ \t#\/}]/ { if (!start) { start = NR; name = $0 } }        # a declaration starts at column 0
    start && !body && /\{[ \t]*$/ { body = 1; next }
    start && !body && /[;}][ \t]*$/ { start = 0 }                 # a declaration, or a one-line definition
  ' "$f"
done > "${TMPDIR:-/tmp}/structure_long.$$"
while IFS= read -r hit; do fail "function longer than 60 lines: $hit"; done < "${TMPDIR:-/tmp}/structure_long.$$"
rm -f "${TMPDIR:-/tmp}/structure_long.$$"

[ $failed -eq 0 ] && echo "structure_test: ok"
exit $failed
