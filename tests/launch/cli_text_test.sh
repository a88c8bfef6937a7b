#!/usr/bin/env bash
# Text in, text out on the real tiny model (CPU, float32), through the binary: init-model writes
# tokenizer.json; text prompts (native and OpenAI form, with and without special tokens) get a
# "text"; stop strings taken from a first run's text end a rerun's requests early (tokens kept
# up to the one completing the string, text cut before it), the same with another batch size
# and without overlap, and byte-identical on a rerun; a model directory without tokenizer.json
# still runs token-id prompts and turns text prompts into error records; OpenAI chat lines are
# rendered in the DeepSeek chat format and `cat --format openai` answers them. bench-tokenizer runs.
set -u
bin=$1
root=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
check() { if ! "$@"; then echo "FAIL: $*"; fail=1; fi; }

"$bin" init-model --config "$root/configs/models/tiny.json" --output "$tmp/model" --seed 3 --float32 >"$tmp/init.log" ||
  { echo "FAIL: init-model"; exit 1; }
[ -f "$tmp/model/tokenizer.json" ] || { echo "FAIL: init-model wrote no tokenizer.json"; cat "$tmp/init.log"; exit 1; }
# bench-tokenizer runs on it (figures are not checked, only that they are printed).
printf 'one line of text\n\nand another, caf\xc3\xa9\n' >"$tmp/corpus.txt"
"$bin" bench-tokenizer --tokenizer "$tmp/model/tokenizer.json" --input "$tmp/corpus.txt" --seconds 0 >"$tmp/bench.log" &&
  grep -q "^encode: .* MB/s" "$tmp/bench.log" && grep -q "^decode: .* MB/s" "$tmp/bench.log" && grep -q "in 2 lines" "$tmp/bench.log" ||
  { echo "FAIL: bench-tokenizer"; cat "$tmp/bench.log"; fail=1; }

python3 - "$tmp/free.jsonl" <<'PY'
import json, sys
prompts = ["The quick brown fox", "Once upon a time there was a little girl", "int main(int argc, char** argv) {",
           "Hello, world! This is a test of the tokenizer", "caf\u00e9 \u00fcber na\u00efve \u4f60\u597d", "return the result of"]
with open(sys.argv[1], "w") as f:
    for i, p in enumerate(prompts):
        req = {"id": f"t{i}", "prompt": p, "max_tokens": 24}
        req.update({"temperature": 0} if i % 2 == 0 else {"temperature": 0.9, "seed": 100 + i})
        f.write(json.dumps(req) + "\n")
    f.write(json.dumps({"id": "plain", "prompt": prompts[0], "max_tokens": 24, "temperature": 0, "add_special_tokens": False}) + "\n")
    f.write(json.dumps({"custom_id": "oa", "method": "POST", "url": "/v1/completions",
                        "body": {"prompt": prompts[1], "max_tokens": 24, "temperature": 0}}) + "\n")
    f.write(json.dumps({"id": "ids", "prompt_token_ids": [5, 6, 7, 8], "max_tokens": 8, "temperature": 0}) + "\n")
PY
job=(--job "$root/configs/jobs/tiny-cpu.json" --seed 5)
"$bin" generate --model "$tmp/model" --input "$tmp/free.jsonl" "${job[@]}" --output "$tmp/free" 2>"$tmp/free.log" ||
  { echo "FAIL: generate with text prompts"; cat "$tmp/free.log"; exit 1; }
grep -q "tokenizer: " "$tmp/free.log" || { echo "FAIL: the tokenizer is not reported"; fail=1; }

# Checks the first run and writes the stop-string run's input.
python3 - "$tmp" <<'PY' || fail=1
import json, subprocess, sys
tmp = sys.argv[1]
recs = [json.loads(l) for l in subprocess.run(["zstd", "-dc", f"{tmp}/free/results-00000-of-00001.jsonl.zst"],
                                             capture_output=True, check=True).stdout.decode().splitlines()]
ok = True
def fail(msg):
    global ok
    print("FAIL:", msg); ok = False
by_id = {r["id"]: r for r in recs}
if len(recs) != 9: fail(f"{len(recs)} records, want 9")
for r in recs:
    if r["finish_reason"] == "error" or not isinstance(r["text"], str): fail(f"no text: {r}")
if by_id["t0"]["num_prompt_tokens"] != by_id["plain"]["num_prompt_tokens"] + 1:
    fail("add_special_tokens=false must drop exactly the BOS")
if sum(1 for r in recs if len(r["text"]) >= 6) < 5: fail("too few outputs with text")
# Stop strings: 2-3 characters from the middle of each text (the last character left out).
stops = {}
with open(f"{tmp}/free.jsonl") as f, open(f"{tmp}/stop.jsonl", "w") as out:
    for line in f:
        req = json.loads(line)
        rid = req.get("id", req.get("custom_id"))
        text = by_id[rid]["text"]
        if len(text) >= 6:
            a = len(text) // 2
            stops[rid] = text[a:a + 2 + len(text) % 2]
            (req["body"] if "body" in req else req)["stop"] = ["\u2603 never", stops[rid]]
        out.write(json.dumps(req) + "\n")
json.dump(stops, open(f"{tmp}/stops.json", "w"))
sys.exit(0 if ok else 1)
PY

"$bin" generate --model "$tmp/model" --input "$tmp/stop.jsonl" "${job[@]}" --output "$tmp/stop" 2>/dev/null || { echo "FAIL: stop run"; exit 1; }
python3 - "$tmp" <<'PY' || fail=1
import json, subprocess, sys
tmp = sys.argv[1]
def records(name):
    out = subprocess.run(["zstd", "-dc", f"{tmp}/{name}/results-00000-of-00001.jsonl.zst"], capture_output=True, check=True).stdout
    return {json.loads(l)["id"]: json.loads(l) for l in out.decode().splitlines()}
free, stop = records("free"), records("stop")
stops = json.load(open(f"{tmp}/stops.json"))
ok, shorter = True, 0
for rid, s in stops.items():
    a, b = free[rid], stop[rid]
    want = a["text"][:a["text"].find(s)]
    if b["finish_reason"] != "stop" or b["stop_reason"] != s or b["text"] != want:
        print(f"FAIL: {rid}: stop {s!r}: got {b['finish_reason']} {b['stop_reason']!r} {b['text']!r}, want text {want!r}"); ok = False
    if b["output_token_ids"] != a["output_token_ids"][:len(b["output_token_ids"])]:
        print(f"FAIL: {rid}: kept tokens are not a prefix of the free run's"); ok = False
    shorter += len(b["output_token_ids"]) < len(a["output_token_ids"])
for rid in free:
    if rid not in stops and stop[rid]["output_token_ids"] != free[rid]["output_token_ids"]:
        print(f"FAIL: {rid} without a stop string changed"); ok = False
if len(stops) < 5 or shorter < len(stops) // 2:
    print(f"FAIL: {len(stops)} stop strings, {shorter} shortened"); ok = False
sys.exit(0 if ok else 1)
PY

# Byte-identical rerun; the same results with another batch size and without overlap.
"$bin" generate --model "$tmp/model" --input "$tmp/stop.jsonl" "${job[@]}" --output "$tmp/again" 2>/dev/null || { echo "FAIL: rerun"; exit 1; }
check cmp "$tmp/stop/results-00000-of-00001.jsonl.zst" "$tmp/again/results-00000-of-00001.jsonl.zst"
check cmp "$tmp/stop/manifest.json" "$tmp/again/manifest.json"
"$bin" generate --model "$tmp/model" --input "$tmp/stop.jsonl" "${job[@]}" --max-num-seqs 2 --no-overlap --output "$tmp/serial" \
  2>/dev/null || { echo "FAIL: serial run"; exit 1; }
# The records without "steps" (which describe the schedule).
outcomes() { zstd -qdc "$1/results-00000-of-00001.jsonl.zst" |
  python3 -c 'import json, sys; [print(json.dumps({k: v for k, v in json.loads(l).items() if k != "steps"})) for l in sys.stdin]'; }
outcomes "$tmp/stop" >"$tmp/stop.txt"
outcomes "$tmp/serial" >"$tmp/serial.txt"
check cmp "$tmp/stop.txt" "$tmp/serial.txt"

# OpenAI batch lines, chat (DeepSeek format, with and without thinking) and completions, and
# `cat --format openai` answering each in its API's shape with the record's text and counts.
python3 - "$tmp/openai.jsonl" <<'PY'
import json, sys
chat = lambda cid, body: {"custom_id": cid, "method": "POST", "url": "/v1/chat/completions", "body": body}
with open(sys.argv[1], "w") as f:
    f.write(json.dumps(chat("c1", {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}],
                                   "max_tokens": 12, "temperature": 0})) + "\n")
    f.write(json.dumps(chat("c2", {"messages": [{"role": "user", "content": "2+2?"}], "thinking": True, "max_tokens": 12,
                                   "temperature": 0, "logprobs": True, "top_logprobs": 2})) + "\n")
    f.write(json.dumps({"custom_id": "p1", "method": "POST", "url": "/v1/completions", "body": {"prompt": "The quick", "max_tokens": 5}}) + "\n")
    f.write(json.dumps(chat("bad", {"messages": [{"role": "assistant", "content": "x"}]})) + "\n")
PY
"$bin" generate --model "$tmp/model" --input "$tmp/openai.jsonl" "${job[@]}" --output "$tmp/openai" 2>"$tmp/openai.log" ||
  { echo "FAIL: generate with OpenAI lines"; cat "$tmp/openai.log"; exit 1; }
"$bin" cat "$tmp/openai" >"$tmp/openai.records" && "$bin" cat "$tmp/openai" --format openai >"$tmp/openai.out" ||
  { echo "FAIL: cat --format openai"; fail=1; }
python3 - "$tmp/openai.records" "$tmp/openai.out" <<'PY' || { echo "FAIL: OpenAI batch output"; cat "$tmp/openai.out"; fail=1; }
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
outs = [json.loads(l) for l in open(sys.argv[2])]
assert [o["custom_id"] for o in outs] == ["c1", "c2", "p1", "bad"], outs
assert [r["api"] for r in recs] == ["chat", "chat-thinking", "completions", None], [r["api"] for r in recs]
for r, o in zip(recs[:3], outs[:3]):
    body = o["response"]["body"]
    assert o["response"]["status_code"] == 200 and o["error"] is None
    assert body["usage"] == {"prompt_tokens": r["num_prompt_tokens"], "completion_tokens": len(r["output_token_ids"]),
                             "total_tokens": r["num_prompt_tokens"] + len(r["output_token_ids"])}, body
    assert body["choices"][0]["finish_reason"] == r["finish_reason"]
c1, c2, p1 = (o["response"]["body"]["choices"][0] for o in outs[:3])
assert outs[0]["response"]["body"]["object"] == "chat.completion" and c1["message"]["content"] == recs[0]["text"]
assert c1["message"]["reasoning_content"] is None
think = recs[1]["text"]
reasoning, _, answer = think.partition("</think>")
assert c2["message"]["reasoning_content"] == reasoning and c2["message"]["content"] == answer, (c2, think)
assert c2["logprobs"]["token_ids"] == recs[1]["output_token_ids"] and all(len(t) == 2 for t in c2["logprobs"]["top_logprobs"])
assert outs[2]["response"]["body"]["object"] == "text_completion" and p1["text"] == recs[2]["text"]
assert outs[3]["response"]["status_code"] == 400 and "the last message must be the user's" in outs[3]["response"]["body"]["error"]["message"]
# The chat prompt is the DeepSeek rendering, BOS once: more prompt tokens than the bare user text.
assert recs[0]["num_prompt_tokens"] > len("Hello"), recs[0]
PY

# Without tokenizer.json: token-id prompts run, text prompts are error records, "text" is null.
cp -r "$tmp/model" "$tmp/bare" && rm "$tmp/bare/tokenizer.json"
"$bin" generate --model "$tmp/bare" --input "$tmp/free.jsonl" "${job[@]}" --output "$tmp/bare-out" 2>"$tmp/bare.log" ||
  { echo "FAIL: run without tokenizer.json"; cat "$tmp/bare.log"; exit 1; }
grep -q "no tokenizer.json" "$tmp/bare.log" || { echo "FAIL: the missing tokenizer is not reported"; fail=1; }
zstd -qdc "$tmp/bare-out/results-00000-of-00001.jsonl.zst" | python3 -c '
import json, sys
recs = [json.loads(l) for l in sys.stdin]
ids = [r for r in recs if r["id"] == "ids"][0]
bad = [r for r in recs if r["id"] != "ids" and (r["finish_reason"] != "error" or "need the tokenizer" not in r["error"])]
sys.exit(1 if bad or ids["finish_reason"] == "error" or ids["text"] is not None or not ids["output_token_ids"] else 0)' ||
  { echo "FAIL: records without tokenizer.json"; fail=1; }
exit $fail
