#!/usr/bin/env bash
# The paged attention kernel on the GPU machine: build, tests, microbenchmarks, forward_bench before (gathered) and after (in place).
# Run from the repository root: tests/gpu/attention_checks.sh
source .deps/env.sh
B=build-cuda
cmake -S . -B $B -DDEEPINFER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
cmake --build $B -j16 --target attention_cuda_tests attention_bench forward_bench 2>&1 | grep -E "error|Error" | head -30
[ -x $B/tests/attention_cuda_tests ] || exit 1
timeout 240 $B/tests/attention_cuda_tests 2>&1 | grep -E "sparse_attention|OK|FAIL|Failure|Expected|actual|differs|written|PASSED|error" | head -60
for l in csa hca swa; do timeout 60 $B/bin/attention_bench --batch 64 --context 32768 --layer $l; done
timeout 60 $B/bin/attention_bench --batch 64 --context 131072 --layer hca
timeout 60 $B/bin/attention_bench --batch 256 --context 32768 --layer csa
timeout 60 $B/bin/attention_bench --batch 1 --context 32768 --layer csa
for att in gathered paged; do timeout 150 $B/bin/forward_bench --config configs/models/v4-flash-slice.json --device cuda --batch 1,64,256 --context 512 --iters 10 --warmup 2 --breakdown 1 --attention $att 2>&1 | grep -E "attention:|batch|median|calls|routed|attention core|indexer|compressor" | head -40; done
