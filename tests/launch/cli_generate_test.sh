#!/usr/bin/env bash
# `deepinfer generate` end to end on the tiny model (CPU, float32), through the binary:
# init-model, a run, a byte-identical rerun, kill -9 + --resume equal to the uninterrupted
# run, a changed job refused on resume, SIGTERM leaving a resumable directory.
set -u
bin=$1
root=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
check() { if ! "$@"; then echo "FAIL: $*"; fail=1; fi; }

"$bin" init-model --config "$root/configs/models/tiny.json" --output "$tmp/model" --seed 3 --float32 >/dev/null || { echo "FAIL: init-model"; exit 1; }
python3 - "$tmp/in.jsonl" <<'PY'
import json, random, sys
random.seed(11)
with open(sys.argv[1], "w") as f:
    for i in range(24):
        if i == 9:
            f.write('{"id": "bad", "prompt_token_ids": [1, -5]}\n'); continue
        n = random.randint(5, 260)
        req = {"id": f"q{i}", "prompt_token_ids": [random.randint(2, 511) for _ in range(n)], "max_tokens": random.randint(1, 12)}
        if i % 2: req.update({"temperature": 0.9, "top_k": 40})
        else: req["temperature"] = 0
        f.write(json.dumps(req) + "\n")
PY
job=(--model "$tmp/model" --input "$tmp/in.jsonl" --job "$root/configs/jobs/tiny-cpu.json" --seed 5)
"$bin" generate "${job[@]}" --output "$tmp/a" 2>"$tmp/a.log" || { echo "FAIL: generate"; cat "$tmp/a.log"; exit 1; }
"$bin" generate "${job[@]}" --output "$tmp/b" 2>/dev/null || { echo "FAIL: rerun"; exit 1; }
check cmp "$tmp/a/results-00000-of-00001.jsonl.zst" "$tmp/b/results-00000-of-00001.jsonl.zst"
check cmp "$tmp/a/manifest.json" "$tmp/b/manifest.json"
check "$bin" verify "$tmp/a" "$tmp/b"
records=$(zstd -dc "$tmp/a/results-00000-of-00001.jsonl.zst" | wc -l)
[ "$records" = 24 ] || { echo "FAIL: $records records, want 24"; fail=1; }
zstd -dc "$tmp/a/results-00000-of-00001.jsonl.zst" | grep -q '"id":"bad".*"finish_reason":"error"' || { echo "FAIL: no error record"; fail=1; }

# A job already started refuses a fresh run into the same directory.
"$bin" generate "${job[@]}" --output "$tmp/a" 2>/dev/null; [ $? = 2 ] || { echo "FAIL: reused directory not refused"; fail=1; }
# Resume with a changed job is refused.
"$bin" generate "${job[@]}" --seed 6 --output "$tmp/a" --resume 2>"$tmp/r.log"; [ $? = 2 ] || { echo "FAIL: changed job not refused"; fail=1; }
grep -q "field 'seed'" "$tmp/r.log" || { echo "FAIL: refusal does not name the field"; cat "$tmp/r.log"; fail=1; }

# kill -9 at several points, then --resume: equal to the uninterrupted run.
for delay in 0.5 1.5 3; do
  out="$tmp/k$delay"
  "$bin" generate "${job[@]}" --output "$out" 2>/dev/null &
  pid=$!
  sleep "$delay"; kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  if [ -d "$out" ]; then
    "$bin" generate "${job[@]}" --output "$out" --resume 2>/dev/null || { echo "FAIL: resume after kill at ${delay}s"; fail=1; }
  else
    "$bin" generate "${job[@]}" --output "$out" 2>/dev/null
  fi
  check "$bin" verify "$tmp/a" "$out"
done

# SIGTERM: exit 130, resumable.
out="$tmp/term"
"$bin" generate "${job[@]}" --output "$out" 2>/dev/null &
pid=$!
# Once the job has started (its handlers are installed long before job.json exists): a TERM
# during a slow start under load would otherwise end the process before main() runs.
for _ in $(seq 300); do [ -f "$out/job.json" ] && break; sleep 0.1; done
sleep 0.5; kill -TERM "$pid"; wait "$pid"; rc=$?
if [ "$rc" = 130 ]; then
  "$bin" generate "${job[@]}" --output "$out" --resume 2>/dev/null || { echo "FAIL: resume after SIGTERM"; fail=1; }
elif [ "$rc" != 0 ]; then echo "FAIL: SIGTERM exit $rc"; fail=1; fi
check "$bin" verify "$tmp/a" "$out"
exit $fail
