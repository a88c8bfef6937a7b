#!/usr/bin/env bash
# The README's run command: builds if needed, makes the tiny model (with tokenizer.json) if absent, runs the job
# over examples/prompts.jsonl, reruns it, shows `verify` reporting identical results, and
# prints where the outputs are and a few results.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${DEEPINFER_BUILD_DIR:-build}
bin=$build/bin/deepinfer
if [ ! -x "$bin" ]; then
  echo "== building (first run: ./launch/test.sh installs packages and builds everything)"
  DEEPINFER_SKIP_TESTS=1 ./launch/test.sh
fi
model=${DEEPINFER_DEMO_MODEL:-$build/models/tiny}
# The default model is (re)made when absent or older than its tokenizer.json (text prompts).
if [ ! -f "$model/config.json" ] || { [ -z "${DEEPINFER_DEMO_MODEL:-}" ] && [ ! -f "$model/tokenizer.json" ]; }; then
  echo "== writing the tiny random model and its tokenizer to $model"
  "$bin" init-model --config configs/models/tiny.json --output "$model" --seed 1 --float32
fi
out=${DEEPINFER_DEMO_OUT:-$build/demo}
rm -rf "$out/run1" "$out/run2"
mkdir -p "$out"
job=(--model "$model" --input examples/prompts.jsonl --job configs/jobs/tiny-cpu.json --seed 7)
echo "== run 1"
"$bin" generate "${job[@]}" --output "$out/run1"
echo "== run 2 (a rerun must be byte-identical)"
"$bin" generate "${job[@]}" --output "$out/run2"
echo "== verify"
"$bin" verify "$out/run1" "$out/run2"
echo "== outputs in $out/run1:"
ls -l "$out/run1"
echo "== a few results (zstd -dc $out/run1/results-00000-of-00001.jsonl.zst):"
zstd -dc "$out/run1/results-00000-of-00001.jsonl.zst" | head -n 4 | cut -c1-300
echo "== the text prompt's result (\"text\" is the decoded output of the random model):"
zstd -dc "$out/run1/results-00000-of-00001.jsonl.zst" | grep '"id":"ex-text"' | cut -c1-600
cat "$out/run1/summary.json"
