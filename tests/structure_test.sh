#!/usr/bin/env bash
# Structure rules that a review would otherwise have to catch (label cpu, runs in CI):
#  1. CUDA is chosen at run time, in CUDA folders: no `#if ... CUDA` outside */cuda/ and the
#     LibTorch compatibility header (style.md "Kernels and devices").
#  2. One official forward: no layer file in model/ names numerics; the transformers arithmetic
#     lives in model/reference/ (model/arithmetic.h).
#  3. Every .cu file is built (a CMakeLists.txt names it), so the CPU build's compile-only check
#     (DEEPINFER_CUDA_COMPILE_CHECK) covers it.
#  4. No function in pipeline/ or launch/ longer than 60 lines (a function: a line at column 0
#     that ends with '{' up to the next line that is exactly '}').
# Usage: tests/structure_test.sh [SOURCE_DIR]
set -uo pipefail
cd "${1:-$(dirname "${BASH_SOURCE[0]}")/..}" || exit 2
failed=0
fail() { echo "structure_test: $*" >&2; failed=1; }

sources() { git ls-files -co --exclude-standard -- "$@" 2>/dev/null || find . -path ./build -prune -o -type f -print; }

while IFS= read -r hit; do
  fail "#if on CUDA outside a cuda/ folder: $hit"
done < <(sources '*.cpp' '*.h' '*.cu' '*.cuh' | grep -v -e '/cuda/' -e '^model/torch_compat.h$' | xargs -r grep -nHE '^\s*#\s*(if|ifdef|ifndef|elif).*CUDA' )

while IFS= read -r hit; do
  fail "a layer file names numerics (use model/arithmetic.h; the transformers one is model/reference/): $hit"
done < <(ls model/*.cpp model/*.h | xargs -r grep -niH 'numerics')

for cu in $(sources '*.cu'); do
  dir=$(dirname "$cu")
  while [ "$dir" != "." ] && [ ! -f "$dir/CMakeLists.txt" ]; do dir=$(dirname "$dir"); done
  grep -q "${cu#"$dir"/}" "$dir/CMakeLists.txt" 2>/dev/null || fail "$cu is not named in $dir/CMakeLists.txt: it would never be compiled"
done

for f in $(sources 'pipeline/*.cpp' 'launch/*.cpp'); do
  awk -v file="$f" '
    /^[^ \t#\/}].*\{[ \t]*$/ && !/^(namespace|struct|class|enum|extern)/ { start = NR; name = $0; next }
    /^}[ \t]*$/ && start { if (NR - start + 1 > 60) printf "%s:%d: %d lines: %s\n", file, start, NR - start + 1, name; start = 0 }
  ' "$f"
done > /tmp/structure_long_functions.$$
while IFS= read -r hit; do fail "function longer than 60 lines: $hit"; done < /tmp/structure_long_functions.$$
rm -f /tmp/structure_long_functions.$$

[ $failed -eq 0 ] && echo "structure_test: ok"
exit $failed
