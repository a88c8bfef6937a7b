#!/usr/bin/env bash
# Decode steps from CUDA graphs give the same bytes as eager steps (issue 19 item 4), on one GPU:
#   tests/gpu/graph_checks.sh BUILD_DIR WORK_DIR [TINY_PROMPTS] [SLICE_PROMPTS]
# For the tiny checkpoint and random:configs/models/v4-flash-slice.json: one `deepinfer generate`
# with CUDA graphs (the default) and one with --no-cuda-graphs over the same prompts (random token
# ids, input 100:1024 and output 100:600 tokens, ignore_eos, greedy and sampled alternating, some
# asking for logprobs), then the count of requests with identical records (all must be) and
# `deepinfer verify`'s first lines (the manifests differ by the mode they record). Throughput of
# each run from summary.json.
set -u
build=$(cd "$1" && pwd)
work=$2
tiny_prompts=${3:-256}
slice_prompts=${4:-64}
bin=$build/bin/deepinfer
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$work"
fail=0
[ -d "$work/tiny_ckpt" ] || "$bin" init-model --config "$root/configs/models/tiny.json" --output "$work/tiny_ckpt" --seed 0 >/dev/null || exit 1
python3 - "$work" "$tiny_prompts" "$slice_prompts" <<'PY'
import json, random, sys
work = sys.argv[1]
for name, n in (("tiny", int(sys.argv[2])), ("slice", int(sys.argv[3]))):
    rng = random.Random(19)
    with open(f"{work}/{name}_prompts.jsonl", "w") as f:
        for i in range(n):
            req = {"id": f"p{i}", "prompt_token_ids": [rng.randrange(2, 512) for _ in range(rng.randint(100, 1024))],
                   "max_tokens": rng.randint(100, 600), "ignore_eos": True, "temperature": 0 if i % 2 == 0 else 0.8}
            if i % 7 == 3: req["logprobs"] = 2
            f.write(json.dumps(req) + "\n")
PY
identical() {  # identical DIR_A DIR_B: requests whose records are equal, of all
  python3 - "$bin" "$1" "$2" <<'PY'
import json, subprocess, sys
def records(d):
    out = subprocess.run([sys.argv[1], "cat", d], capture_output=True, text=True, check=True).stdout
    rows = [json.loads(l) for l in out.splitlines() if l.strip()]
    return {r["id"]: (r["output_token_ids"], r.get("logprobs"), r["finish_reason"]) for r in rows}
a, b = records(sys.argv[2]), records(sys.argv[3])
same = sum(a[k] == b.get(k) for k in a)
print(f"identical requests (tokens, logprobs, finish reason): {same} of {len(a)}")
sys.exit(0 if a and same == len(a) == len(b) else 1)
PY
}
for model in tiny slice; do
  spec=$work/tiny_ckpt
  [ $model = slice ] && spec=random:$root/configs/models/v4-flash-slice.json
  for mode in graphs eager; do
    flag=()
    [ $mode = eager ] && flag=(--no-cuda-graphs)
    rm -rf "$work/${model}_$mode"
    start=$SECONDS
    "$bin" generate --model "$spec" --input "$work/${model}_prompts.jsonl" --output "$work/${model}_$mode" --max-num-seqs 256 \
      --num-blocks 4096 --max-num-batched-tokens 8192 --seed 3 "${flag[@]}" >"$work/${model}_$mode.out" 2>"$work/${model}_$mode.log" ||
      { echo "FAIL: $model $mode generate"; tail -20 "$work/${model}_$mode.log"; fail=1; continue; }
    python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print(sys.argv[2], round(s['output_tokens_per_s']), 'output tok/s,', s['elapsed_s'], 's')" \
      "$work/${model}_$mode/summary.json" "$model $mode ($((SECONDS - start)) s with start-up):"
  done
  identical "$work/${model}_graphs" "$work/${model}_eager" || { echo "FAIL: $model results differ with and without graphs"; fail=1; }
  # verify compares the manifests too, which differ by the mode they record (job.cuda_graphs).
  "$bin" verify "$work/${model}_graphs" "$work/${model}_eager" 2>&1 | head -4
done
[ $fail = 0 ] && echo "graph checks passed"
exit $fail
