#!/usr/bin/env bash
# An attention kernel option in one GPU call of at most ten minutes, `heads` (the head-split kernel,
# model/cuda/sparse_attention_heads.cu: AttentionOptions::head_split) or `early` (q loaded and the
# first window rows prefetched before the split kernel's wait: AttentionOptions::early_inputs).
# The LibTorch build of the attention tests and forward_bench starts in the background while the
# nvcc-only microbenchmarks run (tests/gpu/kernel_micro.sh --no-build MODE: the option off and on
# side by side, every output compared with the reference revision's); then the SparseAttentionCuda
# tests (against the float64 definition, bitwise batch invariance, the option's same-bits tests)
# and forward_bench on v4-flash-slice with the option off and on, twice alternately.
# HEADS_FLAGS picks the variant the LibTorch build compiles (e.g. "-DDEEPINFER_HEADS_OVERLAP=1");
# FORWARD_BATCHES the forward_bench batches (default 1,64,256; fewer for a shorter call).
# Here first: tests/gpu/kernel_micro.sh --prepare REV && tests/gpu/kernel_micro.sh --build-only MODE
# There, carrying .deps and build-micro:
#   source .deps/env.sh && tests/gpu/attention_option_checks.sh heads|early
# Logs go to $OUT (or /tmp/attention-option); a stage is skipped when too little of the call is left.
set -uo pipefail
mode=${1:-}
case "$mode" in
  heads) option=--head-split ;;
  early) option=--early-inputs ;;
  *) echo "usage: $0 heads|early" >&2; exit 2 ;;
esac
out=${OUT:-/tmp/attention-option}
mkdir -p "$out"
B=${DEEPINFER_CUDA_BUILD:-build-cuda}
budget=${CHECKS_BUDGET:-560}  # seconds of this call the stages may use
flags=(-DDEEPINFER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=RelWithDebInfo)
[ -n "${HEADS_FLAGS:-}" ] && flags+=("-DCMAKE_CUDA_FLAGS=$HEADS_FLAGS")
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
(cmake -S . -B "$B" "${flags[@]}" >/dev/null && cmake --build "$B" -j16 --target attention_cuda_tests forward_bench) >"$out/build.log" 2>&1 &
build=$!
timeout 240 tests/gpu/kernel_micro.sh --no-build "$mode" 2>&1 | tee "$out/micro.log"
wait $build || { echo "build failed (${HEADS_FLAGS:-default flags}):"; grep -E "error" "$out/build.log" | head -20; exit 1; }
echo "== build done at ${SECONDS}s (${HEADS_FLAGS:-default flags})"
left() { echo $((budget - SECONDS)); }
if [ "$(left)" -gt 60 ]; then
  DEEPINFER_SOURCE_DIR=$PWD timeout "$(left)" "$B/tests/attention_cuda_tests" --gtest_filter='SparseAttentionCuda.*' >"$out/tests.log" 2>&1
  echo "== attention_cuda_tests SparseAttentionCuda.*: exit $? at ${SECONDS}s"
  grep -E "^\[ +(OK|FAILED|SKIPPED|PASSED) |Failure|Expected|differs" "$out/tests.log" | head -30
fi
# Off and on twice, alternately: the first process on a fresh machine runs slow whichever way the
# option goes, so a single off-then-on pair favours the option.
for run in 1 2; do
  for on in 0 1; do
    [ "$(left)" -gt 90 ] || { echo "== forward_bench $option $on (round $run): skipped, $(left)s left"; continue; }
    log="$out/forward_${run}_$on.log"
    timeout "$(left)" "$B/bin/forward_bench" --config configs/models/v4-flash-slice.json --device cuda --batch "${FORWARD_BATCHES:-1,64,256}" \
      --context 32768 --iters 10 --warmup 2 --breakdown 1 $option $on >"$log" 2>&1
    echo "== forward_bench $option $on (round $run, context 32768): exit $? at ${SECONDS}s"
    grep -E "^attention:|^decode step|^batch|attention core|skipped|rror" "$log" | head -24
  done
done
