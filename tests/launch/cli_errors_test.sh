#!/usr/bin/env bash
# Bad input through the binary: each problem with what the command line names exits 2 with a
# message naming it, and leaves no output directory behind; --resume of a finished job keeps
# its summary.json.
set -u
bin=$1
root=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
"$bin" init-model --config "$root/configs/models/tiny.json" --output "$tmp/model" --seed 3 --float32 >/dev/null || { echo "FAIL: init-model"; exit 1; }
printf '{"id": "a", "prompt_token_ids": [5, 6, 7], "max_tokens": 3}\n{"id": "b", "prompt": "hello", "max_tokens": 2}\n' >"$tmp/in.jsonl"
job=(--job "$root/configs/jobs/tiny-cpu.json" --seed 5)

# expect_bad NAME MESSAGE ARGS...: exit 2, MESSAGE on stderr, no output directory.
expect_bad() {
  local name=$1 message=$2; shift 2
  rm -rf "$tmp/out"
  "$bin" generate "$@" "${job[@]}" --output "$tmp/out" 2>"$tmp/$name.log"; local rc=$?
  [ "$rc" = 2 ] || { echo "FAIL: $name: exit $rc, want 2"; cat "$tmp/$name.log"; fail=1; }
  grep -qF -- "$message" "$tmp/$name.log" || { echo "FAIL: $name: stderr lacks '$message'"; cat "$tmp/$name.log"; fail=1; }
  [ ! -e "$tmp/out" ] || { echo "FAIL: $name: left an output directory"; fail=1; }
}

mkdir -p "$tmp/noconfig" "$tmp/inputs"
cp "$tmp/model"/*.safetensors "$tmp/noconfig/"
expect_bad no_config "--model $tmp/noconfig: no config.json" --model "$tmp/noconfig" --input "$tmp/in.jsonl"
expect_bad not_a_dir "not a directory" --model "$tmp/in.jsonl" --input "$tmp/in.jsonl"
expect_bad input_dir "input $tmp/inputs is a directory" --model "$tmp/model" --input "$tmp/inputs"
expect_bad input_missing "cannot open input $tmp/none.jsonl" --model "$tmp/model" --input "$tmp/none.jsonl"

cp -r "$tmp/model" "$tmp/badtok"
echo '{"model": ' >"$tmp/badtok/tokenizer.json"
expect_bad bad_tokenizer "tokenizer.json" --model "$tmp/badtok" --input "$tmp/in.jsonl"
cp -r "$tmp/model" "$tmp/badst"
for f in "$tmp/badst"/*.safetensors; do head -c 100 "$f" >"$f.cut" && mv "$f.cut" "$f"; done
expect_bad bad_safetensors "safetensors $tmp/badst/" --model "$tmp/badst" --input "$tmp/in.jsonl"
cp -r "$tmp/model" "$tmp/badconfig"
echo '{"vocab_size": "many"}' >"$tmp/badconfig/config.json"
expect_bad bad_config "vocab_size" --model "$tmp/badconfig" --input "$tmp/in.jsonl"

# --resume of a finished job changes nothing, summary.json included.
"$bin" generate --model "$tmp/model" --input "$tmp/in.jsonl" "${job[@]}" --output "$tmp/done" 2>/dev/null || { echo "FAIL: generate"; exit 1; }
cp "$tmp/done/summary.json" "$tmp/summary.before"
"$bin" generate --model "$tmp/model" --input "$tmp/in.jsonl" "${job[@]}" --output "$tmp/done" --resume >"$tmp/resume.out" 2>&1 \
  || { echo "FAIL: resume of a finished job"; cat "$tmp/resume.out"; fail=1; }
cmp -s "$tmp/summary.before" "$tmp/done/summary.json" || { echo "FAIL: --resume of a finished job rewrote summary.json:"; cat "$tmp/done/summary.json"; fail=1; }
grep -q "nothing to do" "$tmp/resume.out" || { echo "FAIL: no 'nothing to do' line"; cat "$tmp/resume.out"; fail=1; }
grep -q '"requests":2' "$tmp/done/summary.json" || { echo "FAIL: summary.json lost its figures"; fail=1; }
exit $fail
