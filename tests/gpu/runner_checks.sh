#!/usr/bin/env bash
# The model runner's per-request logit work on CUDA (logprobs, logit_bias, banned and allowed
# ids; engine/model_runner.cpp), end to end through `deepinfer generate` on the tiny model in
# bfloat16: what the CPU tests (engine_runner_tests) check in float32, seen on the GPU.
# Run from the repository root after building deepinfer: tests/gpu/runner_checks.sh BUILD_DIR
set -u
bin=${1:-build-cuda}/bin/deepinfer
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$bin" init-model --config configs/models/tiny.json --output "$tmp/model" --seed 3 >/dev/null || { echo "FAIL: init-model"; exit 1; }
python3 - "$tmp/in.jsonl" <<'PY'
import json, random, sys
random.seed(5)
prompt = lambda n: [random.randint(2, 511) for _ in range(n)]
reqs = [
    {"id": "logprobs", "prompt_token_ids": prompt(40), "max_tokens": 6, "temperature": 0, "logprobs": 3},
    {"id": "bias", "prompt_token_ids": prompt(30), "max_tokens": 6, "temperature": 0, "logit_bias": {"7": 100}, "logprobs": 0},
    {"id": "banned", "prompt_token_ids": prompt(30), "max_tokens": 6, "temperature": 0.8, "logit_bias": {"7": 100}, "banned_token_ids": [7]},
    {"id": "allowed", "prompt_token_ids": prompt(50), "max_tokens": 6, "temperature": 1.0, "allowed_token_ids": [11, 12, 13]},
]
with open(sys.argv[1], "w") as f:
    for r in reqs: f.write(json.dumps(r) + "\n")
PY
"$bin" generate --model "$tmp/model" --input "$tmp/in.jsonl" --output "$tmp/out" --seed 1 2>"$tmp/log" || { echo "FAIL: generate"; tail -20 "$tmp/log"; exit 1; }
"$bin" cat "$tmp/out" > "$tmp/records.jsonl" || { echo "FAIL: cat"; exit 1; }
python3 - "$tmp/records.jsonl" <<'PY'
import json, math, sys
recs = {r["id"]: r for r in map(json.loads, open(sys.argv[1]))}
fail = []
lp = recs["logprobs"]["logprobs"]
print("logprobs:", json.dumps(lp)[:400])
if not lp or len(lp) != len(recs["logprobs"]["output_token_ids"]): fail.append("logprobs missing or wrong length")
print("bias:", recs["bias"]["output_token_ids"])
if set(recs["bias"]["output_token_ids"]) != {7}: fail.append("logit_bias +100 on 7 did not make every token 7")
print("banned:", recs["banned"]["output_token_ids"])
if 7 in recs["banned"]["output_token_ids"]: fail.append("a banned token was sampled")
print("allowed:", recs["allowed"]["output_token_ids"])
if not set(recs["allowed"]["output_token_ids"]) <= {11, 12, 13}: fail.append("a token outside allowed_token_ids was sampled")
print("FAIL: " + "; ".join(fail) if fail else "runner checks passed")
sys.exit(1 if fail else 0)
PY
