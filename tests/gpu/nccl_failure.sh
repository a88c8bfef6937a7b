#!/usr/bin/env bash
# Failures under NCCL on the GPU machine (issue 7), 2 GPUs (nvidia-h200-x2):
#   tests/gpu/nccl_failure.sh BUILD_DIR WORK_DIR
# 1. an injected failure on rank 1 (DEEPINFER_FAIL_RANK=1, thrown at its third step) ends both
#    ranks non-zero within 60 s with a message naming rank 1;
# 2. kill -9 of one rank 5 s after the job's output folder appeared ends the job non-zero within 60 s;
# 3. more ranks than GPUs (3 ranks on 2 GPUs) is refused with a message.
# Exit status: the number of failed checks.
set -u
build=$(cd "$1" && pwd)
work=$2
bin=$build/bin/deepinfer
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$work"
fail=0
mpi=(mpirun --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x PATH)
[ -d "$work/tiny_ckpt" ] || "$bin" init-model --config "$root/configs/models/tiny.json" --output "$work/tiny_ckpt" --seed 0 >/dev/null || exit 1
python3 - "$work/fail_prompts.jsonl" <<'PY'
import json, random, sys
rng = random.Random(7)
with open(sys.argv[1], "w") as f:
    for i in range(32):
        f.write(json.dumps({"id": f"f{i}", "prompt_token_ids": [rng.randrange(2, 512) for _ in range(rng.randint(100, 400))],
                            "max_tokens": 1024, "ignore_eos": True}) + "\n")
PY
job=(generate --model "$work/tiny_ckpt" --input "$work/fail_prompts.jsonl" --max-num-seqs 64 --num-blocks 2048)

echo "== injected failure on rank 1 (2 ranks, NCCL)"
rm -rf "$work/f"
start=$SECONDS
DEEPINFER_FAIL_RANK=1 timeout 90 "${mpi[@]}" -np 2 -x DEEPINFER_FAIL_RANK "$bin" "${job[@]}" --output "$work/f" >/dev/null 2>"$work/f.log"
rc=$?
echo "injected failure: exit $rc after $((SECONDS - start)) s"
tail -n 5 "$work/f.log"
if [ "$rc" = 0 ] || [ "$rc" = 124 ] || [ $((SECONDS - start)) -gt 60 ]; then echo "FAIL: injected failure: exit $rc"; fail=$((fail + 1)); fi
grep -q "rank 1 failed: injected failure" "$work/f.log" || { echo "FAIL: no 'rank 1 failed' message"; fail=$((fail + 1)); }

echo "== kill -9 of rank 1 mid-job (2 ranks, NCCL)"
rm -rf "$work/k"
start=$SECONDS
"${mpi[@]}" -np 2 "$bin" "${job[@]}" --output "$work/k" >/dev/null 2>"$work/k.log" &
pid=$!
for _ in $(seq 300); do [ -f "$work/k/job.json" ] && break; sleep 0.1; done
sleep 5  # past loading, into the steps (NCCL exchanges in flight)
killed_at=$SECONDS
victim=$(pgrep -P "$pid" | tail -n 1)  # one of the two ranks (mpirun's last child)
if [ -z "$victim" ] || ! kill -9 "$victim" 2>/dev/null; then
  echo "FAIL: kill -9: no running rank to kill (the job ended or never started)"; fail=$((fail + 1))
fi
timeout 60 tail --pid="$pid" -f /dev/null
if kill -0 "$pid" 2>/dev/null; then  # still running 60 s after the kill: a hang
  kill -9 $(pgrep -P "$pid") "$pid" 2>/dev/null; wait "$pid"; rc=124
else
  wait "$pid"; rc=$?
fi
echo "kill -9 of one rank: exit $rc, $((SECONDS - killed_at)) s after the kill ($((killed_at - start)) s after the start)"
tail -n 5 "$work/k.log"
if [ "$rc" = 0 ] || [ "$rc" = 124 ] || ! grep -q "signal 9" "$work/k.log"; then echo "FAIL: kill -9: exit $rc"; fail=$((fail + 1)); fi

echo "== 3 ranks on 2 GPUs"
rm -rf "$work/g"
timeout 60 "${mpi[@]}" -np 3 --oversubscribe "$bin" "${job[@]}" --output "$work/g" >/dev/null 2>"$work/g.log"
rc=$?
echo "3 ranks on 2 GPUs: exit $rc"
tail -n 5 "$work/g.log"
[ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q "has no GPU of its own" "$work/g.log" || { echo "FAIL: 3 ranks on 2 GPUs not refused with a message"; fail=$((fail + 1)); }
exit $fail
