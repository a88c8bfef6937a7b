#!/usr/bin/env bash
# The torch-free kernel microbenchmark (tests/model/attention_micro.cu) on the GPU machine: built
# with nvcc alone (seconds, no LibTorch), then run for the attention and indexer shapes of the
# issue. With a reference copy of the kernels (made here first by
# `tests/gpu/kernel_micro.sh --prepare REV`: git REV's sparse_attention.cu and index_scores.cu
# into .deps/ref/, compiled there with -Ddeepinfer=deepinfer_ref), each output is compared with that revision's.
# `profile` as an argument adds an Nsight Compute report of each kernel (logs under $OUT).
#   tests/gpu/kernel_micro.sh --prepare HEAD     (here, before the call; .deps travels as carry)
#   tests/gpu/kernel_micro.sh [profile]          (there)
set -uo pipefail
if [ "${1:-}" = "--prepare" ]; then
  mkdir -p .deps/ref
  for f in sparse_attention index_scores; do
    git show "${2:-HEAD}:model/cuda/$f.cu" > .deps/ref/$f.cu
  done
  echo "reference kernels of ${2:-HEAD} in .deps/ref"
  exit 0
fi
out=${OUT:-/tmp}
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
mkdir -p build-micro
ref=()
if [ -f .deps/ref/sparse_attention.cu ]; then
  for f in sparse_attention index_scores; do
    $nvcc -std=c++17 -O3 -arch=sm_90 -I. -Ddeepinfer=deepinfer_ref -x cu -c .deps/ref/$f.cu -o build-micro/ref_$f.o || exit 1
  done
  ref=(-DDEEPINFER_MICRO_REFERENCE build-micro/ref_sparse_attention.o build-micro/ref_index_scores.o)
fi
$nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo -I. -Xptxas -v -c model/cuda/sparse_attention_sm90.cu \
  -o build-micro/sparse_attention_sm90.o > "$out/micro_build.log" 2>&1 || { cat "$out/micro_build.log"; exit 1; }
$nvcc -std=c++17 -O3 -arch=sm_90 -lineinfo -I. -Xptxas -v tests/model/attention_micro.cu model/cuda/sparse_attention.cu \
  model/cuda/index_scores.cu build-micro/sparse_attention_sm90.o "${ref[@]}" -o build-micro/attention_micro >> "$out/micro_build.log" 2>&1 ||
  { cat "$out/micro_build.log"; exit 1; }
grep -E "registers|spill" "$out/micro_build.log" | grep -v "0 bytes spill" | head -20
M=build-micro/attention_micro
if [ "${1:-}" = "stages" ]; then  # the Hopper kernel without its key loads (1), scores (2), P V (4): where a tile's time goes
  for skip in 1 2 4 6; do
    $nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I. -DDEEPINFER_SM90_SKIP=$skip -c model/cuda/sparse_attention_sm90.cu -o build-micro/skip$skip.o &&
      $nvcc -std=c++17 -O3 -arch=sm_90 -I. tests/model/attention_micro.cu model/cuda/sparse_attention.cu model/cuda/index_scores.cu \
        build-micro/skip$skip.o -o build-micro/skip$skip && echo "skip $skip: $(build-micro/skip$skip attention --batch 64 --context 32768 --layer csa | head -1)"
  done
fi
for l in csa hca swa; do $M attention --batch 64 --context 32768 --layer $l; done
$M attention --batch 256 --context 32768 --layer csa
$M attention --batch 64 --context 131072 --layer hca
$M attention --batch 1 --context 32768 --layer csa
$M attention --batch 64 --context 32768 --layer csa --hot 1
for c in 32768 131072; do $M indexer --batch 64 --context $c; done
if [ "${1:-}" = "profile" ]; then
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  stalls="--metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio"
  $ncu --clock-control none --kernel-name regex:split --launch-skip 3 --launch-count 1 $stalls $M attention --batch 64 --context 32768 --layer csa --iters 12 > "$out/ncu_stalls.txt" 2>&1
  grep -E "stalled" "$out/ncu_stalls.txt" | sort -k3 -n -r | head -12
  sections="--section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section SourceCounters"
  $ncu --clock-control none --kernel-name regex:split --launch-skip 3 --launch-count 1 $sections $M attention --batch 64 --context 32768 --layer csa --iters 12 > "$out/ncu_attention.txt" 2>&1
  $ncu --clock-control none --kernel-name regex:index_scores --launch-skip 3 --launch-count 1 $sections $M indexer --batch 64 --context 131072 --iters 8 > "$out/ncu_indexer.txt" 2>&1
  for f in ncu_attention ncu_indexer; do
    echo "== $f"
    grep -E "^  [a-z_]+.*\(|Duration|Throughput|Pipe|Stall|Warp Cycles|Issued|Eligible|Active Warps|Achieved Occupancy|L1/TEX Hit|L2 Hit|Bank|Registers|Shared Memory Configuration|Block Limit" "$out/$f.txt" | head -60
  done
fi
