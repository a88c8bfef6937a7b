#!/usr/bin/env bash
# The README's run command: builds if needed, makes the tiny model (with tokenizer.json) if absent, runs the job
# over examples/prompts.jsonl under `mpirun -np 2` (two CPU ranks, the experts split between them;
# DEEPINFER_DEMO_RANKS=1 runs one process without mpirun), reruns it, shows `verify` reporting
# identical results, and prints where the outputs are and a few results in input order (`cat`).
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
ranks=${DEEPINFER_DEMO_RANKS:-2}
launcher=()
if [ "$ranks" -gt 1 ]; then
  # Two CPU ranks; as root Open MPI needs these two variables, and on a small machine --oversubscribe.
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( ($(nproc) + ranks - 1) / ranks ))}
  launcher=(mpirun -np "$ranks" --oversubscribe)
fi
job=(--model "$model" --input examples/prompts.jsonl --job configs/jobs/tiny-cpu.json --seed 7)
echo "== run 1: ${launcher[*]} $bin generate ${job[*]} --output $out/run1"
"${launcher[@]}" "$bin" generate "${job[@]}" --output "$out/run1"
echo "== run 2 (a rerun must be byte-identical)"
"${launcher[@]}" "$bin" generate "${job[@]}" --output "$out/run2"
echo "== verify"
"$bin" verify "$out/run1" "$out/run2"
echo "== outputs in $out/run1 (one results file per rank):"
ls -l "$out/run1"
echo "== a few results, every rank's merged in input order ($bin cat $out/run1):"
"$bin" cat "$out/run1" >"$out/run1.jsonl"
head -n 4 "$out/run1.jsonl" | cut -c1-300
echo "== the text prompt's result (\"text\" is the decoded output of the random model):"
grep '"id":"ex-text"' "$out/run1.jsonl" | cut -c1-600
cat "$out/run1/summary.json"
