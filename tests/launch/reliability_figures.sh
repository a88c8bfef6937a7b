#!/usr/bin/env bash
# The figures issue 21 asks for, on the tiny model (CPU, float32), through the binary; not a
# test (its output goes into a closing note): peak RSS of `generate --deadline 0` (every line
# read, checked, sharded and written as a record, nothing generated) over 10K, 100K and 1M
# lines; then kill -9 at 5 random points of a 400-request job: the records on disk (results
# file frames + waiting file), and a --resume that reruns only the rest and is
# `verify`-identical to the uninterrupted run.
#   tests/launch/reliability_figures.sh build/bin/deepinfer [SEED]
set -u
bin=$1
seed=${2:-1}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$bin" init-model --config "$root/configs/models/tiny.json" --output "$tmp/model" --seed 3 --float32 >/dev/null || exit 1
job=(--model "$tmp/model" --job "$root/configs/jobs/tiny-cpu.json" --seed 5)

for n in 10000 100000 1000000; do
  python3 -c "
import sys
with open(sys.argv[1], 'w') as f:
    for i in range(int(sys.argv[2])):
        f.write('{\"id\": \"r%d\", \"prompt_token_ids\": [%d, %d, %d], \"max_tokens\": 4}\n' % (i, 2 + i % 50, 3 + i % 40, 4 + i % 30))
" "$tmp/in_$n.jsonl" "$n"
  start=$(date +%s.%N)
  /usr/bin/time -v "$bin" generate "${job[@]}" --input "$tmp/in_$n.jsonl" --deadline 0 --output "$tmp/rss_$n" 2>"$tmp/rss_$n.log" >/dev/null
  rc=$?
  end=$(date +%s.%N)
  records=$("$bin" cat "$tmp/rss_$n" | wc -l)
  echo "rss: $n lines: exit $rc, $records records, peak RSS $(grep 'Maximum resident' "$tmp/rss_$n.log" | awk '{print $NF}') KB, $(python3 -c "print(round($end - $start, 1))") s"
done

# Records on disk: complete zstd frames of the results file (a partial last frame is not
# counted) plus the waiting file's lines.
on_disk() {
  python3 - "$1" <<'PY'
import glob, os, subprocess, sys
d = sys.argv[1]
kept = 0
for f in glob.glob(os.path.join(d, "results-*.jsonl.zst*")) + glob.glob(os.path.join(d, "waiting-*.jsonl.zst*")):
    out = subprocess.run(["zstd", "-dc", f], capture_output=True).stdout
    kept += out.count(b"\n")
print(kept)
PY
}
python3 -c "
import sys, random
random.seed(7)
with open(sys.argv[1], 'w') as f:
    for i in range(400):
        n = random.randint(4, 60)
        f.write('{\"id\": \"k%d\", \"prompt_token_ids\": [%s], \"max_tokens\": %d}\n' % (i, ','.join(str(random.randint(2, 500)) for _ in range(n)), random.randint(8, 120)))
" "$tmp/kill.jsonl"
"$bin" generate "${job[@]}" --input "$tmp/kill.jsonl" --output "$tmp/whole" 2>/dev/null || exit 1
RANDOM=$seed
for point in 1 2 3 4 5; do
  delay=$(python3 -c "import random; random.seed($seed * 100 + $point); print(round(random.uniform(1.0, 8.0), 2))")
  out="$tmp/kill_$point"
  "$bin" generate "${job[@]}" --input "$tmp/kill.jsonl" --output "$out" 2>"$out.log" &
  pid=$!
  sleep "$delay"
  kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  kept=$(on_disk "$out")
  "$bin" generate "${job[@]}" --input "$tmp/kill.jsonl" --output "$out" --resume 2>"$out.resume.log" >/dev/null
  rc=$?
  reran=$(python3 -c "import json; print(json.load(open('$out/summary.json')).get('requests', '?'))" 2>/dev/null)
  if "$bin" verify "$tmp/whole" "$out" >/dev/null 2>&1; then same=identical; else same=DIFFERENT; fi
  echo "kill -9 at ${delay}s: $kept records kept on disk; --resume exit $rc, ran $reran requests (400 - kept: $((400 - kept))); $same to the uninterrupted run"
done
