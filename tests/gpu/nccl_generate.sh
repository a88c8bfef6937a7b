#!/usr/bin/env bash
# EP x DP on the GPU machine (issue 7), one GPU per rank through NCCL:
#   tests/gpu/nccl_generate.sh BUILD_DIR WORK_DIR [NUM_PROMPTS] [SLICE_PROMPTS]
# 1. the NCCL communicator test under mpirun -np 2;
# 2. the tiny checkpoint: 1 rank (GPU 0), then 2 ranks twice: the reruns byte-identical
#    (`deepinfer verify`), the 2-rank tokens against the 1-rank ones (fraction printed);
# 3. random:configs/models/v4-flash-slice.json on 2 ranks twice, byte-identical.
# Prompts: NUM_PROMPTS (default 256) random prompts, input and output lengths 100:1024,
# ignore_eos, fixed seed, greedy and sampled alternating. Throughput from each summary.json.
set -u
build=$(cd "$1" && pwd)
work=$2
prompts=${3:-256}
slice_prompts=${4:-$prompts}
bin=$build/bin/deepinfer
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$work"
fail=0
mpi=(mpirun -np 2 --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x PATH)
step() { echo "== $*"; }

step "NCCL communicator test (2 ranks, 2 GPUs)"
"${mpi[@]}" "$build/tests/mpi_communicator_tests" || fail=1

[ -d "$work/tiny_ckpt" ] || "$bin" init-model --config "$root/configs/models/tiny.json" --output "$work/tiny_ckpt" --seed 0 >/dev/null || exit 1
python3 - "$work/prompts.jsonl" "$prompts" "$work/slice_prompts.jsonl" "$slice_prompts" <<'PY'
import json, random, sys
for path, n in ((sys.argv[1], int(sys.argv[2])), (sys.argv[3], int(sys.argv[4]))):
    rng = random.Random(2026)
    with open(path, "w") as f:
        for i in range(n):
            req = {"id": f"p{i}", "prompt_token_ids": [rng.randrange(2, 512) for _ in range(rng.randint(100, 1024))],
                   "max_tokens": rng.randint(100, 1024), "ignore_eos": True}
            req["temperature"] = 0 if i % 2 == 0 else 0.8
            f.write(json.dumps(req) + "\n")
PY

summary() { python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print(sys.argv[2], json.dumps(s))" "$1/summary.json" "$2"; }

run_job() {  # run_job NAME RANKS MODEL PROMPTS
  local name=$1 ranks=$2 model=$3 input=$4 start=$SECONDS
  rm -rf "$work/$name"
  if [ "$ranks" = 1 ]; then
    "$bin" generate --model "$model" --input "$input" --output "$work/$name" --max-num-seqs 256 --num-blocks 4096 \
      --max-num-batched-tokens 8192 >"$work/$name.out" 2>"$work/$name.log"
  else
    "${mpi[@]}" "$bin" generate --model "$model" --input "$input" --output "$work/$name" --max-num-seqs 256 --num-blocks 4096 \
      --max-num-batched-tokens 8192 >"$work/$name.out" 2>"$work/$name.log"
  fi
  local rc=$?
  echo "$name: $ranks rank(s), exit $rc, $((SECONDS - start)) s wall"
  tail -n 3 "$work/$name.log"
  [ $rc -eq 0 ] && summary "$work/$name" "$name summary:"
  return $rc
}

step "tiny: 1 rank, then 2 ranks twice"
run_job tiny_1 1 "$work/tiny_ckpt" "$work/prompts.jsonl" || fail=1
run_job tiny_2a 2 "$work/tiny_ckpt" "$work/prompts.jsonl" || fail=1
run_job tiny_2b 2 "$work/tiny_ckpt" "$work/prompts.jsonl" || fail=1
"$bin" verify "$work/tiny_2a" "$work/tiny_2b" || { echo "FAIL: tiny 2-rank rerun differs"; fail=1; }
for f in results-00000-of-00002.jsonl.zst results-00001-of-00002.jsonl.zst manifest.json; do
  cmp "$work/tiny_2a/$f" "$work/tiny_2b/$f" || { echo "FAIL: $f differs between the 2-rank runs"; fail=1; }
done
"$bin" cat "$work/tiny_2a" >"$work/tiny_2a.jsonl" && "$bin" cat "$work/tiny_1" >"$work/tiny_1.jsonl" && python3 - "$work/tiny_2a.jsonl" "$work/tiny_1.jsonl" <<'PY'
import json, sys
two = [json.loads(l) for l in open(sys.argv[1])]
one = [json.loads(l) for l in open(sys.argv[2])]
assert [r["id"] for r in two] == [r["id"] for r in one]
same = sum(a["output_token_ids"] == b["output_token_ids"] for a, b in zip(two, one))
greedy = [i for i, r in enumerate(one) if int(r["id"][1:]) % 2 == 0]
same_greedy = sum(two[i]["output_token_ids"] == one[i]["output_token_ids"] for i in greedy)
prefix = [next((k for k, (x, y) in enumerate(zip(a["output_token_ids"], b["output_token_ids"])) if x != y), len(a["output_token_ids"]))
          for a, b in zip(two, one)]
print(f"tiny 2-rank (NCCL) vs 1-rank: identical requests {same}/{len(one)} = {same/len(one):.3f}, greedy {same_greedy}/{len(greedy)}; "
      f"mean identical prefix {sum(prefix)/len(prefix):.1f} tokens")
PY
[ $? -eq 0 ] || { echo "FAIL: cat or the 2-rank / 1-rank comparison"; fail=1; }

step "v4-flash-slice (random weights): 2 ranks twice"
run_job slice_2a 2 "random:$root/configs/models/v4-flash-slice.json" "$work/slice_prompts.jsonl" || fail=1
run_job slice_2b 2 "random:$root/configs/models/v4-flash-slice.json" "$work/slice_prompts.jsonl" || fail=1
"$bin" verify "$work/slice_2a" "$work/slice_2b" || { echo "FAIL: slice 2-rank rerun differs"; fail=1; }
exit $fail
