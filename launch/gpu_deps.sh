#!/usr/bin/env bash
# Run here (the development machine) before a GPU-machine call, after ../shared/gpu/prepare.sh:
# adds what the GPU machine lacks beyond simdjson — PCRE2's headers and library (for the
# tokenizer) — as .deb files to .deps/debs, which .deps/env.sh unpacks there.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
[ -d .deps/debs ] || { echo "run ../shared/gpu/prepare.sh first" >&2; exit 1; }
if ! ls .deps/debs/libpcre2-dev_*.deb >/dev/null 2>&1; then
  (apt-cache policy libpcre2-dev | grep -q Candidate) || apt-get update -qq
  (cd .deps/debs && apt-get download -q libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 >/dev/null)
fi
echo "ready: .deps/debs holds $(ls .deps/debs | tr '\n' ' ')"
