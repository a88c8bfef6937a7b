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

# Inputs a job cannot read twice (a pipe, a FIFO) or names twice; options that do not parse or
# fit (no silent wrap to 32 bits); a job file that is not there.
expect_bad pipe "is not a regular file" --model "$tmp/model" --input <(cat "$tmp/in.jsonl")
mkfifo "$tmp/fifo"
expect_bad fifo "input $tmp/fifo is not a regular file" --model "$tmp/model" --input "$tmp/fifo"
expect_bad twice "is named twice" --model "$tmp/model" --input "$tmp/in.jsonl" --input "$tmp/inputs/../in.jsonl"
expect_bad seqs_wrap "option --max-num-seqs = 4294967297 is out of range [1, 1048576]" --model "$tmp/model" --input "$tmp/in.jsonl" \
  --max-num-seqs 4294967297
expect_bad deadline_text "option --deadline = 'abc' is not a finite number" --model "$tmp/model" --input "$tmp/in.jsonl" --deadline abc
expect_bad deadline_negative "option --deadline = -1 must be >= 0" --model "$tmp/model" --input "$tmp/in.jsonl" --deadline -1
"$bin" generate --model "$tmp/model" --input "$tmp/in.jsonl" --job "$tmp/nope.json" --output "$tmp/out" 2>"$tmp/job.log"
[ $? = 2 ] && grep -qF "job file: cannot open $tmp/nope.json" "$tmp/job.log" || { echo "FAIL: missing --job file"; cat "$tmp/job.log"; fail=1; }

# An --output that cannot be a directory: exit 2 naming it, before the model loads.
touch "$tmp/afile"
ln -s "$tmp/nowhere" "$tmp/dangling"
for case in "afile:exists and is not a directory" "afile/sub:$tmp/afile is not a directory" "dangling:symbolic link to a missing path"; do
  "$bin" generate --model "$tmp/model" --input "$tmp/in.jsonl" "${job[@]}" --output "$tmp/${case%%:*}" 2>"$tmp/output.log"
  rc=$?
  [ "$rc" = 2 ] && grep -qF -- "${case#*:}" "$tmp/output.log" || { echo "FAIL: --output $tmp/${case%%:*}: exit $rc"; cat "$tmp/output.log"; fail=1; }
done
"$bin" cat "$tmp/nowhere" >/dev/null 2>"$tmp/cat.log"; rc=$?
[ "$rc" = 2 ] && grep -qF "$tmp/nowhere is not a directory" "$tmp/cat.log" || { echo "FAIL: cat of a missing directory: exit $rc"; cat "$tmp/cat.log"; fail=1; }

# Bans that leave no token: an error record, and the job goes on. An empty input: a results file
# that zstd reads (no records).
python3 -c 'import json; print(json.dumps({"id": "all", "prompt_token_ids": [5], "max_tokens": 2, "banned_token_ids": list(range(512))}))' >"$tmp/ban.jsonl"
python3 -c 'import json; print(json.dumps({"id": "allowed", "prompt_token_ids": [5], "max_tokens": 2, "allowed_token_ids": [2, 3], "banned_token_ids": [3, 2]}))' >>"$tmp/ban.jsonl"
python3 -c 'import json; print(json.dumps({"id": "stops", "prompt_token_ids": [5], "max_tokens": 2, "min_tokens": 1, "stop_token_ids": [7], "allowed_token_ids": [7, 8], "banned_token_ids": [8]}))' >>"$tmp/ban.jsonl"
cat "$tmp/in.jsonl" >>"$tmp/ban.jsonl"
"$bin" generate --model "$tmp/model" --input "$tmp/ban.jsonl" "${job[@]}" --output "$tmp/ban" 2>"$tmp/ban.log" || { echo "FAIL: bans"; cat "$tmp/ban.log"; fail=1; }
records=$(zstd -dc "$tmp/ban/results-00000-of-00001.jsonl.zst")
for want in '"id":"all".*"finish_reason":"error".*every token of the vocabulary is banned' \
  '"id":"allowed".*"finish_reason":"error".*ban.jsonl:2: every id in .allowed_token_ids. is banned' \
  '"id":"stops".*"finish_reason":"error".*min_tokens = 1 holds the stop tokens' '"id":"a"'; do
  grep -q "$want" <<<"$records" || { echo "FAIL: no record matching $want"; echo "$records"; fail=1; }
done
: >"$tmp/empty.jsonl"
"$bin" generate --model "$tmp/model" --input "$tmp/empty.jsonl" "${job[@]}" --output "$tmp/empty" 2>/dev/null || { echo "FAIL: empty input"; fail=1; }
n=$(zstd -dc "$tmp/empty/results-00000-of-00001.jsonl.zst" | wc -l) && [ "$n" = 0 ] || { echo "FAIL: zstd -dc of an empty job's results"; fail=1; }

# init-model: what it cannot do is refused with exit 2 before it writes anything.
for case in "$tmp/model:already holds a checkpoint" "$tmp/afile:exists and is not a directory" ":--output is empty"; do
  "$bin" init-model --config "$root/configs/models/tiny.json" --output "${case%%:*}" >/dev/null 2>"$tmp/init.log"
  rc=$?
  [ "$rc" = 2 ] && grep -qF -- "${case#*:}" "$tmp/init.log" || { echo "FAIL: init-model --output '${case%%:*}': exit $rc"; cat "$tmp/init.log"; fail=1; }
done
python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); c["hidden_size"]=10**8; json.dump(c, open(sys.argv[2], "w"))' \
  "$root/configs/models/tiny.json" "$tmp/huge.json"
"$bin" init-model --config "$tmp/huge.json" --output "$tmp/huge" >/dev/null 2>"$tmp/init.log"
rc=$?
[ "$rc" = 2 ] && grep -qE "GB free|more than half of this machine" "$tmp/init.log" && [ ! -e "$tmp/huge" ] ||
  { echo "FAIL: init-model of a huge config: exit $rc"; cat "$tmp/init.log"; fail=1; }

# --resume of a finished job changes nothing, summary.json included.
"$bin" generate --model "$tmp/model" --input "$tmp/in.jsonl" "${job[@]}" --output "$tmp/done" 2>/dev/null || { echo "FAIL: generate"; exit 1; }
cp "$tmp/done/summary.json" "$tmp/summary.before"
"$bin" generate --model "$tmp/model" --input "$tmp/in.jsonl" "${job[@]}" --output "$tmp/done" --resume >"$tmp/resume.out" 2>&1 \
  || { echo "FAIL: resume of a finished job"; cat "$tmp/resume.out"; fail=1; }
cmp -s "$tmp/summary.before" "$tmp/done/summary.json" || { echo "FAIL: --resume of a finished job rewrote summary.json:"; cat "$tmp/done/summary.json"; fail=1; }
grep -q "nothing to do" "$tmp/resume.out" || { echo "FAIL: no 'nothing to do' line"; cat "$tmp/resume.out"; fail=1; }
grep -q '"requests":2' "$tmp/done/summary.json" || { echo "FAIL: summary.json lost its figures"; fail=1; }
exit $fail
