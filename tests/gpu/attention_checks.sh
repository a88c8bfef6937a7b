#!/usr/bin/env bash
# The paged attention kernel on the GPU machine, in one call: build the small targets, the tests
# (against the definition, batch invariance, the forward against gathered attention), the
# microbenchmark, and forward_bench on v4-flash-slice before (gathered keys)
# and after (in place). Run from the repository root: tests/gpu/attention_checks.sh [forward]
source .deps/env.sh
B=${DEEPINFER_CUDA_BUILD:-build-cuda}
cmake -S . -B $B -DDEEPINFER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
cmake --build $B -j16 --target attention_cuda_tests attention_bench forward_bench 2>&1 | grep -E "error|Error" | head -30
[ -x $B/tests/attention_cuda_tests ] || exit 1
timeout 240 $B/tests/attention_cuda_tests 2>&1 | tee /tmp/attention_tests.log | grep -E "sparse_attention\]|OK|FAIL|Failure|Expected|actual|differs|written|PASSED|error" | grep -v "tiny SWA\|tiny CSA\|tiny HCA\|20 heads\|24 heads" | head -60
for l in csa hca swa; do timeout 60 $B/bin/attention_bench --batch 64 --context 32768 --layer $l; done
timeout 60 $B/bin/attention_bench --batch 256 --context 32768 --layer csa
timeout 60 $B/bin/attention_bench --batch 64 --context 131072 --layer hca
timeout 60 $B/bin/attention_bench --batch 1 --context 32768 --layer csa
grep -E "OK \]|FAILED|PASSED" /tmp/attention_tests.log
[ -n "${OUT:-}" ] && cp /tmp/attention_tests.log "$OUT/"
[ "${1:-}" = forward ] || exit 0
for ctx in 512 32768; do
  for att in gathered paged; do
    timeout 200 $B/bin/forward_bench --config configs/models/v4-flash-slice.json --device cuda --batch 1,64,256 --context $ctx --iters 10 --warmup 2 --breakdown 1 --attention $att > /tmp/forward_${ctx}_$att.log 2>&1
    [ -n "${OUT:-}" ] && cp /tmp/forward_${ctx}_$att.log "$OUT/"
    grep -E "attention:|decode step|attention core +CSA" /tmp/forward_${ctx}_$att.log
  done
done
