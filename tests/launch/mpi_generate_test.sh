#!/usr/bin/env bash
# `deepinfer generate` under `mpirun -np 2` on the tiny model (CPU, float32): a 2-rank job
# completes and reruns byte-identical, its tokens match the 1-rank job (fraction printed),
# `cat` gives global input order, uneven input (rank 1 gets nothing) completes, and an
# injected failure on rank 1 ends both ranks non-zero within 60 s.
set -u
bin=$1
root=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
export OMP_NUM_THREADS=1
mpi=(mpirun -np 2 --oversubscribe)
check() { if ! "$@"; then echo "FAIL: $*"; fail=1; fi; }

"$bin" init-model --config "$root/configs/models/tiny.json" --output "$tmp/model" --seed 3 --float32 >/dev/null || { echo "FAIL: init-model"; exit 1; }
python3 - "$tmp/in.jsonl" "$tmp/single.jsonl" <<'PY'
import json, random, sys
random.seed(7)
with open(sys.argv[1], "w") as f:
    for i in range(9):
        if i == 4:
            f.write('{"id": "bad", "prompt_token_ids": [1, -5]}\n'); continue
        req = {"id": f"q{i}", "prompt_token_ids": [random.randint(2, 511) for _ in range(random.randint(3, 40))],
               "max_tokens": random.randint(2, 6)}
        if i % 2: req.update({"temperature": 0.9, "top_k": 40})
        else: req["temperature"] = 0
        f.write(json.dumps(req) + "\n")
with open(sys.argv[2], "w") as f:
    f.write(json.dumps({"id": "only", "prompt_token_ids": [5, 6, 7, 8], "max_tokens": 3, "temperature": 0}) + "\n")
PY
job=(--job "$root/configs/jobs/tiny-cpu.json" --seed 5 --max-num-seqs 4)

# 1 rank, no mpirun: the reference (with a logit dump, engine/model_runner.h).
DEEPINFER_DEBUG_LOGITS="$tmp/dump_one" "$bin" generate --model "$tmp/model" --input "$tmp/in.jsonl" "${job[@]}" --output "$tmp/one" 2>"$tmp/one.log" || { echo "FAIL: 1-rank run"; cat "$tmp/one.log"; exit 1; }
# 2 ranks, twice; run a dumps its logits.
for run in a b; do
  DEEPINFER_DEBUG_LOGITS=$([ $run = a ] && echo "$tmp/dump_two") "${mpi[@]}" "$bin" generate --model "$tmp/model" --input "$tmp/in.jsonl" "${job[@]}" --output "$tmp/$run" >"$tmp/$run.out" 2>"$tmp/$run.log" \
    || { echo "FAIL: 2-rank run $run"; cat "$tmp/$run.log"; exit 1; }
done
for f in results-00000-of-00002.jsonl.zst results-00001-of-00002.jsonl.zst manifest.json job.json; do check cmp "$tmp/a/$f" "$tmp/b/$f"; done
check "$bin" verify "$tmp/a" "$tmp/b"
grep -q '"world_size":2,"sharding":"balanced-by-prompt-tokens"' "$tmp/a/job.json" || { echo "FAIL: job.json lacks world_size/sharding"; fail=1; }
grep -q '"ranks":2' "$tmp/a/summary.json" || { echo "FAIL: summary.json is not the 2-rank aggregate"; fail=1; }
grep -q 'results-00001-of-00002' "$tmp/a/manifest.json" || { echo "FAIL: manifest lacks rank 1's file"; fail=1; }
"$bin" cat "$tmp/a" >"$tmp/a.jsonl" || { echo "FAIL: cat"; fail=1; }
"$bin" cat "$tmp/one" >"$tmp/one.jsonl" || { echo "FAIL: cat (1 rank)"; fail=1; }
python3 - "$tmp/a.jsonl" "$tmp/one.jsonl" "$tmp/in.jsonl" <<'PY' || fail=1
import json, sys
two = [json.loads(l) for l in open(sys.argv[1])]
one = [json.loads(l) for l in open(sys.argv[2])]
ids = [json.loads(l)["id"] for l in open(sys.argv[3])]
assert [r["id"] for r in two] == ids, f"cat order {[r['id'] for r in two]} != input order {ids}"
assert [r["id"] for r in one] == ids
same = sum(a["output_token_ids"] == b["output_token_ids"] and a["finish_reason"] == b["finish_reason"] for a, b in zip(two, one))
greedy = [i for i, l in enumerate(open(sys.argv[3])) if '"temperature": 0}' in l or '"temperature": 0,' in l]
same_greedy = sum(two[i]["output_token_ids"] == one[i]["output_token_ids"] for i in greedy)
print(f"2-rank vs 1-rank: identical requests {same}/{len(ids)} = {same/len(ids):.2f} (greedy {same_greedy}/{len(greedy)})")
sys.exit(0 if same == len(ids) else 1)
PY
# The logits behind those tokens: every sampled (seed, position) of the 1-rank run is in the
# 2-rank dumps; report the largest difference (EP sums the experts' partials in another order).
python3 - "$tmp"/dump_one.rank-0.jsonl "$tmp"/dump_two.rank-0.jsonl "$tmp"/dump_two.rank-1.jsonl <<'PY' || fail=1
import json, sys
def load(paths):
    rows = {}
    for path in paths:
        for line in open(path):
            r = json.loads(line)
            rows[(r["seed"], r["position"])] = r["logits"]
    return rows
one, two = load(sys.argv[1:2]), load(sys.argv[2:])
missing = set(one) - set(two)
worst = max(max(abs(a - b) for a, b in zip(one[k], two[k])) for k in one if k in two)
print(f"2-rank vs 1-rank logits (debug dump): {len(one)} sampled rows, {len(missing)} missing, max |diff| {worst:.3g}")
sys.exit(0 if not missing and len(one) > 0 and worst <= 1e-3 else 1)
PY

# Uneven input: one request, rank 1 owns none.
"${mpi[@]}" "$bin" generate --model "$tmp/model" --input "$tmp/single.jsonl" "${job[@]}" --output "$tmp/u" >/dev/null 2>"$tmp/u.log" \
  || { echo "FAIL: uneven run"; cat "$tmp/u.log"; fail=1; }
"$bin" generate --model "$tmp/model" --input "$tmp/single.jsonl" "${job[@]}" --output "$tmp/u1" >/dev/null 2>&1 || { echo "FAIL: uneven 1-rank"; fail=1; }
[ "$("$bin" cat "$tmp/u")" = "$("$bin" cat "$tmp/u1")" ] || { echo "FAIL: uneven 2-rank result differs from 1 rank"; fail=1; }
grep -q '"file":"results-00001-of-00002.jsonl.zst","records":0,' "$tmp/u/manifest.json" || { echo "FAIL: rank 1 has records"; cat "$tmp/u/manifest.json"; fail=1; }

# --resume of the 1-rank job under 2 ranks: a changed job, exit 2 as for one rank (not 1), refused
# before the model loads.
timeout 60 "${mpi[@]}" "$bin" generate --model "$tmp/model" --input "$tmp/in.jsonl" "${job[@]}" --output "$tmp/one" --resume >/dev/null 2>"$tmp/ws.log"
rc=$?
[ "$rc" = 2 ] || { echo "FAIL: world-size change on --resume gave exit $rc, want 2"; cat "$tmp/ws.log"; fail=1; }
grep -q "field 'job.world_size'\|world_size" "$tmp/ws.log" || { echo "FAIL: the refusal does not name world_size"; cat "$tmp/ws.log"; fail=1; }
! grep -q "loading" "$tmp/ws.log" || { echo "FAIL: the world-size refusal came after the model loaded"; cat "$tmp/ws.log"; fail=1; }

# Resume where rank 1 is already complete and rank 0 has lost its file: rank 1 only joins the steps.
rm "$tmp/u/results-00000-of-00002.jsonl.zst" "$tmp/u/manifest.json"
timeout 60 "${mpi[@]}" "$bin" generate --model "$tmp/model" --input "$tmp/single.jsonl" "${job[@]}" --output "$tmp/u" --resume >/dev/null 2>"$tmp/ur.log" \
  || { echo "FAIL: resume with one rank complete"; cat "$tmp/ur.log"; fail=1; }
[ "$("$bin" cat "$tmp/u")" = "$("$bin" cat "$tmp/u1")" ] || { echo "FAIL: resumed uneven result differs"; fail=1; }

# SIGTERM to mpirun mid-job, then --resume (or a fresh run if nothing was started): equal to
# the uninterrupted 2-rank run of the same (longer) input.
python3 - "$tmp/long.jsonl" <<'PY'
import json, random, sys
random.seed(3)
with open(sys.argv[1], "w") as f:
    for i in range(6):
        f.write(json.dumps({"id": f"l{i}", "prompt_token_ids": [random.randint(2, 511) for _ in range(20)],
                            "max_tokens": 40, "ignore_eos": True, "temperature": 0.8}) + "\n")
PY
long=(--model "$tmp/model" --input "$tmp/long.jsonl" "${job[@]}" --max-num-seqs 2)
"${mpi[@]}" "$bin" generate "${long[@]}" --output "$tmp/l" >/dev/null 2>&1 || { echo "FAIL: long run"; fail=1; }
out="$tmp/term"
"${mpi[@]}" "$bin" generate "${long[@]}" --output "$out" >/dev/null 2>"$tmp/t.log" &
pid=$!
for _ in $(seq 100); do [ -f "$out/job.json" ] && break; sleep 0.1; done
sleep 0.5; kill -TERM "$pid"; wait "$pid"; echo "SIGTERM to mpirun: exit $?"
if [ -f "$out/job.json" ]; then
  timeout 120 "${mpi[@]}" "$bin" generate "${long[@]}" --output "$out" --resume >/dev/null 2>"$tmp/tr.log" \
    || { echo "FAIL: resume after SIGTERM"; cat "$tmp/t.log" "$tmp/tr.log"; fail=1; }
else
  rm -rf "$out"; "${mpi[@]}" "$bin" generate "${long[@]}" --output "$out" >/dev/null 2>&1
fi
check "$bin" verify "$tmp/l" "$out"

# Injected failure on rank 1: both end non-zero within 60 s, the message names rank 1.
start=$(date +%s)
DEEPINFER_FAIL_RANK=1 timeout 60 "${mpi[@]}" "$bin" generate --model "$tmp/model" --input "$tmp/in.jsonl" "${job[@]}" --output "$tmp/f" >/dev/null 2>"$tmp/f.log"
rc=$?
echo "injected failure: exit $rc after $(( $(date +%s) - start )) s"
if [ "$rc" = 0 ] || [ "$rc" = 124 ]; then echo "FAIL: injected failure gave exit $rc"; cat "$tmp/f.log"; fail=1; fi
grep -q "rank 1 failed: injected failure" "$tmp/f.log" || { echo "FAIL: no 'rank 1 failed' message"; cat "$tmp/f.log"; fail=1; }
# kill -9 of one rank mid-job: mpirun ends the other with a non-zero exit, naming the rank.
start=$(date +%s)
"${mpi[@]}" "$bin" generate "${long[@]}" --output "$tmp/k" >/dev/null 2>"$tmp/k.log" &
pid=$!
for _ in $(seq 100); do [ -f "$tmp/k/job.json" ] && break; sleep 0.1; done
victim=$(pgrep -P "$pid" | tail -n 1); kill -9 "$victim" 2>/dev/null
timeout 60 tail --pid="$pid" -f /dev/null; wait "$pid"; rc=$?
echo "kill -9 of one rank: exit $rc after $(( $(date +%s) - start )) s"
[ "$rc" != 0 ] || { echo "FAIL: kill -9 of a rank gave exit 0"; fail=1; }
grep -q "process rank [01]" "$tmp/k.log" || { echo "FAIL: no message naming the killed rank"; cat "$tmp/k.log"; fail=1; }
# A bad --model on every rank (load fails before any collective): also non-zero, no hang.
timeout 60 "${mpi[@]}" "$bin" generate --model "$tmp/nope" --input "$tmp/in.jsonl" "${job[@]}" --output "$tmp/g" >/dev/null 2>"$tmp/g.log"
rc=$?
[ "$rc" = 2 ] || { echo "FAIL: bad model gave exit $rc, want 2 (bad input, as for one rank)"; fail=1; }
grep -q "rank [01] failed" "$tmp/g.log" || { echo "FAIL: bad model message names no rank"; cat "$tmp/g.log"; fail=1; }
# ... and said once, not once a rank (rank 1 waits for rank 0's abort).
[ "$(grep -c "failed:" "$tmp/g.log")" = 1 ] || { echo "FAIL: the bad model's message is not printed once"; cat "$tmp/g.log"; fail=1; }
exit $fail
