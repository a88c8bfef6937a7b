#!/usr/bin/env bash
# `deepinfer verify` exit codes through the binary: 0 identical, 1 different, 2 unreadable/usage.
set -u
bin=$1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/a" "$tmp/b" "$tmp/c"
printf '{"id":"a","finish_reason":"stop"}\n' | zstd -q -o "$tmp/a/results-00000-of-00001.jsonl.zst"
cp "$tmp/a/results-00000-of-00001.jsonl.zst" "$tmp/b/"
printf '{"id":"a","finish_reason":"length"}\n' | zstd -q -o "$tmp/c/results-00000-of-00001.jsonl.zst"
fail=0
expect() {  # expect CODE ARGS...
  local want=$1; shift
  "$bin" "$@" >"$tmp/out" 2>&1; local got=$?
  if [ "$got" != "$want" ]; then echo "FAIL: deepinfer $* exited $got, want $want"; cat "$tmp/out"; fail=1; fi
}
expect 0 verify "$tmp/a" "$tmp/b"
grep -q "identical: 1 records" "$tmp/out" || { echo "FAIL: no 'identical' line"; fail=1; }
expect 1 verify "$tmp/a" "$tmp/c"
grep -q "field 'finish_reason'" "$tmp/out" || { echo "FAIL: difference not named"; cat "$tmp/out"; fail=1; }
expect 2 verify "$tmp/a" "$tmp/missing"
expect 2 verify "$tmp/a"
expect 2 no-such-command
exit $fail
