#!/usr/bin/env bash
# The head-split attention kernel (model/cuda/sparse_attention_heads.cu) in one GPU call of at most
# ten minutes: the LibTorch build of its tests and forward_bench starts in the background while the
# nvcc-only microbenchmarks run (tests/gpu/kernel_micro.sh --no-build heads: the default kernels and
# every head-split variant side by side); then its tests (against the float64 definition, bitwise
# batch invariance) and forward_bench on v4-flash-slice with the kernel off and on.
# HEADS_FLAGS picks the variant the LibTorch build compiles (e.g. "-DDEEPINFER_HEADS_OVERLAP=1").
# Here first: tests/gpu/kernel_micro.sh --prepare HEAD && tests/gpu/kernel_micro.sh --build-only heads
# There, carrying .deps and build-micro:
#   source .deps/env.sh && tests/gpu/head_split_checks.sh
# Logs go to $OUT (or /tmp/head-split); a stage is skipped when too little of the call is left.
set -uo pipefail
out=${OUT:-/tmp/head-split}
mkdir -p "$out"
B=${DEEPINFER_CUDA_BUILD:-build-cuda}
budget=${HEADS_BUDGET:-560}  # seconds of this call the stages may use
flags=(-DDEEPINFER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=RelWithDebInfo)
[ -n "${HEADS_FLAGS:-}" ] && flags+=("-DCMAKE_CUDA_FLAGS=$HEADS_FLAGS")
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
(cmake -S . -B "$B" "${flags[@]}" >/dev/null && cmake --build "$B" -j16 --target attention_cuda_tests forward_bench) >"$out/build.log" 2>&1 &
build=$!
timeout 240 tests/gpu/kernel_micro.sh --no-build heads 2>&1 | tee "$out/micro.log"
wait $build || { echo "build failed (${HEADS_FLAGS:-default flags}):"; grep -E "error" "$out/build.log" | head -20; exit 1; }
echo "== build done at ${SECONDS}s (${HEADS_FLAGS:-default flags})"
left() { echo $((budget - SECONDS)); }
if [ "$(left)" -gt 60 ]; then
  DEEPINFER_SOURCE_DIR=$PWD timeout "$(left)" "$B/tests/attention_cuda_tests" --gtest_filter='SparseAttentionCuda.*' >"$out/tests.log" 2>&1
  echo "== attention_cuda_tests SparseAttentionCuda.*: exit $? at ${SECONDS}s"
  grep -E "^\[ +(OK|FAILED|SKIPPED|PASSED) |Failure|Expected|differs" "$out/tests.log" | head -30
fi
for split in 0 1; do
  [ "$(left)" -gt 90 ] || { echo "== forward_bench --head-split $split: skipped, $(left)s left"; continue; }
  timeout "$(left)" "$B/bin/forward_bench" --config configs/models/v4-flash-slice.json --device cuda --batch 1,64,256 --context 32768 \
    --iters 10 --warmup 2 --breakdown 1 --head-split $split >"$out/forward_$split.log" 2>&1
  echo "== forward_bench --head-split $split (context 32768): exit $? at ${SECONDS}s"
  grep -E "^attention:|^decode step|^batch|attention core|skipped|rror" "$out/forward_$split.log" | head -24
done
