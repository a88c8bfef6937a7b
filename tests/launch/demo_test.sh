#!/usr/bin/env bash
# ./launch/demo.sh, the README's main command: two CPU ranks under mpirun, a byte-identical
# rerun, and `cat` giving every example in input order.
set -u
root=$1
build=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
DEEPINFER_BUILD_DIR=$build DEEPINFER_DEMO_MODEL=$tmp/model DEEPINFER_DEMO_OUT=$tmp/out "$root/launch/demo.sh" >"$tmp/demo.log" 2>&1 \
  || { echo "FAIL: demo.sh exited non-zero"; tail -30 "$tmp/demo.log"; exit 1; }
fail=0
grep -q "mpirun -np 2" "$tmp/demo.log" || { echo "FAIL: the demo did not run under mpirun -np 2"; fail=1; }
grep -q "^identical: 15 records" "$tmp/demo.log" || { echo "FAIL: verify did not report 15 identical records"; fail=1; }
for f in results-00000-of-00002.jsonl.zst results-00001-of-00002.jsonl.zst manifest.json summary.json; do
  [ -f "$tmp/out/run1/$f" ] || { echo "FAIL: no $f"; fail=1; }
done
grep -q '"ranks":2' "$tmp/out/run1/summary.json" || { echo "FAIL: summary.json is not a 2-rank summary"; fail=1; }
ids='import json, sys; [print((lambda r: r.get("id", r.get("custom_id")))(json.loads(l))) for l in open(sys.argv[1])]'
diff <(python3 -c "$ids" "$tmp/out/run1.jsonl") <(python3 -c "$ids" "$root/examples/prompts.jsonl") \
  || { echo "FAIL: cat is not in input order"; fail=1; }
exit $fail
