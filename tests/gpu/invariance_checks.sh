#!/usr/bin/env bash
# Issue 20's comparisons on the GPU machine: does a request's result depend on what else ran?
#   tests/gpu/invariance_checks.sh BUILD_DIR WORK_DIR [PROMPTS] [JOB OPTIONS...]
# For the tiny checkpoint and random:configs/models/v4-flash-slice.json, against one baseline run
# (max_num_seqs 256, num_blocks 4096): a small pool that forces preemptions (num_blocks 400),
# --max-num-seqs 64, a kill -9 once a quarter of the records can be read back then --resume, and, where
# two GPUs are visible, 2 ranks (mpirun, NCCL) instead of 1. Each line prints how many requests
# have identical records (tokens, logprobs, finish reason) to the baseline's. Prompts: random
# token ids, input 100:1024, output 100:600, ignore_eos, greedy and sampled alternating, every
# seventh with logprobs. JOB OPTIONS (e.g. --batch-invariant, --no-cuda-graphs) go to every run.
# INVARIANCE_MODELS (default "tiny slice") picks the models; each run's elapsed time is printed.
# Exit 0 when it ran; it reports, it does not judge: the issue's gate is 256/256 on every line.
set -u
build=$(cd "$1" && pwd)
work=$2
prompts=${3:-256}
shift $(($# < 3 ? $# : 3))
extra=("$@")
bin=$build/bin/deepinfer
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$work"
[ -d "$work/tiny_ckpt" ] || "$bin" init-model --config "$root/configs/models/tiny.json" --output "$work/tiny_ckpt" --seed 0 >/dev/null || exit 1
python3 - "$work/prompts.jsonl" "$prompts" <<'PY'
import json, random, sys
rng = random.Random(20)
with open(sys.argv[1], "w") as f:
    for i in range(int(sys.argv[2])):
        req = {"id": f"p{i}", "prompt_token_ids": [rng.randrange(2, 512) for _ in range(rng.randint(100, 1024))],
               "max_tokens": rng.randint(100, 600), "ignore_eos": True, "temperature": 0 if i % 2 == 0 else 0.8}
        if i % 7 == 3: req["logprobs"] = 2
        f.write(json.dumps(req) + "\n")
PY
same() {  # same DIR_A DIR_B NAME: requests whose records are equal
  python3 - "$bin" "$1" "$2" "$3" <<'PY'
import json, subprocess, sys
def records(d):
    out = subprocess.run([sys.argv[1], "cat", d], capture_output=True, text=True).stdout
    rows = [json.loads(l) for l in out.split("\n") if l.strip()]  # not splitlines(): text may hold U+2028 and the like
    return {r["id"]: (r["output_token_ids"], r.get("logprobs"), r["finish_reason"]) for r in rows}
a, b = records(sys.argv[2]), records(sys.argv[3])
try:
    s = json.load(open(sys.argv[3] + "/summary.json"))
    extra = f" ({s.get('preemptions', '?')} preemptions, {round(s.get('output_tokens_per_s', 0))} output tok/s)"
except Exception:
    extra = ""
print(f"{sys.argv[4]}: {sum(a[k] == b.get(k) for k in a)} of {len(a)} requests identical to the baseline{extra}")
PY
}
run() {  # run NAME MODEL [OPTIONS...]: a generate over the prompts
  local name=$1 model=$2; shift 2
  rm -rf "$work/$name"
  local start=$SECONDS
  "$bin" generate --model "$model" --input "$work/prompts.jsonl" --output "$work/$name" --max-num-batched-tokens 8192 --seed 3 \
    "${extra[@]}" "$@" >"$work/$name.out" 2>"$work/$name.log" || { echo "FAIL: $name exited $?"; tail -5 "$work/$name.log"; }
  echo "  ($name: $((SECONDS - start)) s)"
}
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
for model in ${INVARIANCE_MODELS:-tiny slice}; do
  spec=$work/tiny_ckpt
  [ $model = slice ] && spec=random:$root/configs/models/v4-flash-slice.json
  run ${model}_base "$spec" --max-num-seqs 256 --num-blocks 4096
  run ${model}_pool "$spec" --max-num-seqs 256 --num-blocks 400
  same "$work/${model}_base" "$work/${model}_pool" "$model, a pool of 400 blocks"
  run ${model}_seqs64 "$spec" --max-num-seqs 64 --num-blocks 4096
  same "$work/${model}_base" "$work/${model}_seqs64" "$model, --max-num-seqs 64"
  # kill -9 once finished records are on disk (in the ordered results or, finished before an
  # earlier request, in the waiting file that --resume reads back), then --resume. Records are
  # flushed every 0.25 s in this run and its resume (job file; the record bytes do not depend on
  # it), so the tiny job's few seconds leave room for the kill.
  rm -rf "$work/${model}_kill"
  echo '{"flush_interval_s": 0.25}' >"$work/fast_flush.json"
  "$bin" generate --model "$spec" --input "$work/prompts.jsonl" --output "$work/${model}_kill" --max-num-batched-tokens 8192 --seed 3 \
    --max-num-seqs 256 --num-blocks 4096 --job "$work/fast_flush.json" "${extra[@]}" >/dev/null 2>"$work/${model}_kill.log" &
  pid=$!
  for _ in $(seq 6000); do
    [ -s "$(ls "$work/${model}_kill"/waiting-*.jsonl.zst 2>/dev/null | head -1)" ] && break
    [ -s "$(ls "$work/${model}_kill"/results-*.jsonl.zst.partial 2>/dev/null | head -1)" ] && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.05
  done
  sleep 0.3
  waiting=$(cat "$work/${model}_kill"/waiting-*.jsonl.zst 2>/dev/null | wc -c)
  kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
  kept=$("$bin" cat "$work/${model}_kill" 2>/dev/null | wc -l)
  "$bin" generate --model "$spec" --input "$work/prompts.jsonl" --output "$work/${model}_kill" --max-num-batched-tokens 8192 --seed 3 \
    --max-num-seqs 256 --num-blocks 4096 --job "$work/fast_flush.json" "${extra[@]}" --resume >/dev/null 2>"$work/${model}_resume.log" || echo "FAIL: --resume exited $?"
  same "$work/${model}_base" "$work/${model}_kill" "$model, kill -9 with $kept ordered records readable and a waiting file of $waiting bytes, then --resume"
  if [ "$gpus" -ge 2 ]; then
    rm -rf "$work/${model}_ranks2"
    mpirun -np 2 --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x PATH "$bin" generate --model "$spec" --input "$work/prompts.jsonl" \
      --output "$work/${model}_ranks2" --max-num-batched-tokens 8192 --seed 3 --max-num-seqs 256 --num-blocks 4096 "${extra[@]}" \
      >/dev/null 2>"$work/${model}_ranks2.log" || echo "FAIL: 2 ranks exited $?"
    same "$work/${model}_base" "$work/${model}_ranks2" "$model, 2 ranks"
  else
    echo "$model, 2 ranks: skipped ($gpus GPU visible; needs nvidia-h200-x2)"
  fi
done
exit 0
