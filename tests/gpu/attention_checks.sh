#!/usr/bin/env bash
# The attention kernels (model/cuda/sparse_attention.cu, index_scores.cu) on the GPU machine, in
# one call: build the small targets, their tests (against the definition / the ATen indexer,
# batch invariance, the forward against gathered attention), the microbenchmarks; then, when
# named: `forward` forward_bench on v4-flash-slice before (gathered keys) and after (in place),
# `reference` the transformers comparison on tests/reference/tiny-bf16.json with FP4 experts,
# `bench` deepinfer bench on v4-flash-slice (64 prompts, 100:1024), `runner` the runner's
# logprobs / logit_bias / banned / allowed ids through `deepinfer generate` (runner_checks.sh).
# Run from the repository root: tests/gpu/attention_checks.sh [forward] [reference] [bench] [runner]
source .deps/env.sh
B=${DEEPINFER_CUDA_BUILD:-build-cuda}
targets="attention_cuda_tests attention_bench"
for stage in "$@"; do
  case $stage in
    forward) targets="$targets forward_bench" ;;
    reference) targets="$targets deepinfer hf_reference_tests" ;;
    bench | runner) targets="$targets deepinfer" ;;
  esac
done
cmake -S . -B $B -DDEEPINFER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
cmake --build $B -j16 --target $targets 2>&1 | grep -E "error|Error" | head -30
[ -x $B/tests/attention_cuda_tests ] || exit 1
timeout 240 $B/tests/attention_cuda_tests > /tmp/attention_tests.log 2>&1
grep -E "V4|48 heads|tiny forward|norm_rope|Failure|Expected|actual|differs|written|error" /tmp/attention_tests.log | head -60
[ -n "${OUT:-}" ] && cp /tmp/attention_tests.log "$OUT/"
for l in csa hca swa; do timeout 60 $B/bin/attention_bench --batch 64 --context 32768 --layer $l; done
timeout 60 $B/bin/attention_bench --batch 256 --context 32768 --layer csa
timeout 60 $B/bin/attention_bench --batch 64 --context 131072 --layer hca
for ctx in 32768 131072; do timeout 60 $B/bin/attention_bench --batch 64 --context $ctx --layer indexer; done
for stage in "$@"; do
  case $stage in
    forward)
      for ctx in ${DEEPINFER_FORWARD_CONTEXTS:-512 32768}; do
        for att in ${DEEPINFER_FORWARD_ATTENTION:-gathered paged}; do
          timeout 200 $B/bin/forward_bench --config configs/models/v4-flash-slice.json --device cuda --batch 1,64,256 --context $ctx --iters 10 \
            --warmup 2 --breakdown 1 --attention $att > /tmp/forward_${ctx}_$att.log 2>&1
          [ -n "${OUT:-}" ] && cp /tmp/forward_${ctx}_$att.log "$OUT/"
          grep -E "attention:|decode step|attention core +CSA|indexer +CSA|calls by part" /tmp/forward_${ctx}_$att.log
        done
      done ;;
    reference)
      DEEPINFER_HF_CONFIGS=tiny-bf16 DEEPINFER_HF_EXPERTS=fp4 timeout 300 tests/reference/run_hf_reference.sh $B /tmp/hf_reference > /tmp/hf_reference.log 2>&1
      echo "run_hf_reference exit $?"
      [ -n "${OUT:-}" ] && cp /tmp/hf_reference.log "$OUT/"
      sed -n '/== summary/,$p' /tmp/hf_reference.log ;;
    bench)
      timeout 200 $B/bin/deepinfer bench --model random:configs/models/v4-flash-slice.json --num-prompts 64 --input-len 100:1024 \
        --output-len 100:1024 --max-num-seqs 256 --num-blocks 4096 --max-num-batched-tokens 8192 2>&1 | grep -vE "^\[rank|memory plan|^  " | tail -8 ;;
    runner)
      timeout 120 tests/gpu/runner_checks.sh $B; echo "runner_checks exit $?" ;;
  esac
done
grep -E "OK \]|FAILED|PASSED" /tmp/attention_tests.log
