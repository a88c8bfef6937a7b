#!/usr/bin/env bash
# The torch-free kernel microbenchmark (tests/model/attention_micro.cu) on the GPU machine: built
# with nvcc alone (seconds, no LibTorch), then run for the attention and indexer shapes of the
# issue. With a reference copy of the kernels (made here first by
# `tests/gpu/kernel_micro.sh --prepare REV`: git REV's model/cuda/ into .deps/ref/, its kernels
# compiled against its own headers with -Ddeepinfer=deepinfer_ref), each output is compared with
# that revision's, bit for bit.
# `profile` as an argument adds an Nsight Compute report of each kernel (logs under $OUT), `trace`
# the Hopper kernels' per-block timestamps (the points are listed in sparse_attention_sm90.cu and
# sparse_attention_heads.cu; the head-split kernel's also from timing-only builds: without its
# copies (1), products (6), softmax maxima exchange (8) or P^T stores (16), with one proxy fence a
# tile, and from warp 3), `gather` the key-gathering probe (tests/model/gather_probe.cu: the copies alone, by cp.async, the
# tensor-memory accelerator and its multicast), `heads` the head-split kernel
# (sparse_attention_heads.cu, `--head-split 1`; also built with DEEPINFER_HEADS_OVERLAP=1 and
# DEEPINFER_HEADS_COPIERS=2) and its timing-only builds without its copies, scores or P V, beside
# the default kernels; `merge` the split kernel traced and beside its timing-only build without the
# pair's merged output stores (DEEPINFER_SM90_SKIP=8); `dsmem` the SM-to-SM network probe
# (tests/model/dsmem_probe.cu: remote stores, st.async and bulk copies between a cluster's blocks);
# `rows` CSA with the picks as entry ids and as entry rows (`--pick-rows 1`), alternately, and traced;
# `stages` the split kernel with stages of 32 keys in four buffers (DEEPINFER_SM90_STAGE_KEYS=32)
# beside the default 64 in two, alternately, and both traced; `early` the split kernel loading q before
# its wait and prefetching its first stage's window rows into the L2 (`--early 1`,
# SparseAttentionArgs::early_inputs) beside the default launch, alternately, and traced.
# `--build-only` builds here (nvcc needs no GPU) and stops;
# `--no-build` runs what build-micro/ holds (carry it), so the call spends no device time compiling.
#   tests/gpu/kernel_micro.sh --prepare HEAD                (here, before the call; .deps travels as carry)
#   tests/gpu/kernel_micro.sh [--build-only|--no-build] [profile|trace|gather|heads|merge|dsmem|rows|stages|early]
set -uo pipefail
if [ "${1:-}" = "--prepare" ]; then
  rm -rf .deps/ref && mkdir -p .deps/ref
  git archive "${2:-HEAD}" model/cuda | tar -x -C .deps/ref || exit 1
  echo "reference kernels of ${2:-HEAD} in .deps/ref"
  exit 0
fi
build=1 run=1
case "${1:-}" in
  --build-only) run=0; shift ;;
  --no-build) build=0; shift ;;
esac
mode=${1:-}
out=${OUT:-/tmp}
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
sm90a=(-gencode=arch=compute_90a,code=sm_90a)
M=build-micro/attention_micro

# attention_micro with the Hopper kernels built with `defines` (the reference objects linked when there).
build_micro() {
  local name=$1
  shift
  $nvcc -std=c++17 -O3 "${sm90a[@]}" -lineinfo -I. -Xptxas -v "$@" -c model/cuda/sparse_attention_sm90.cu -o build-micro/$name.sm90.o \
    >> "$out/micro_build.log" 2>&1 &&
    $nvcc -std=c++17 -O3 "${sm90a[@]}" -lineinfo -I. -Xptxas -v "$@" -c model/cuda/sparse_attention_heads.cu -o build-micro/$name.heads.o \
      >> "$out/micro_build.log" 2>&1 &&
    $nvcc -std=c++17 -O3 -arch=sm_90 -lineinfo -I. "$@" tests/model/attention_micro.cu build-micro/sparse_attention.o build-micro/index_scores.o build-micro/index_topk.o \
      build-micro/$name.sm90.o build-micro/$name.heads.o "${ref[@]}" -o build-micro/$name >> "$out/micro_build.log" 2>&1
}

if [ $build = 1 ]; then
  mkdir -p build-micro
  : > "$out/micro_build.log"
  ref=()
  if [ -f .deps/ref/model/cuda/sparse_attention.cu ]; then
    for f in sparse_attention index_scores sparse_attention_sm90 sparse_attention_heads; do
      [ -f .deps/ref/model/cuda/$f.cu ] || continue
      arch=(-arch=sm_90)
      case $f in sparse_attention_sm90 | sparse_attention_heads) arch=("${sm90a[@]}") ;; esac
      $nvcc -std=c++17 -O3 "${arch[@]}" -I.deps/ref -I. -Ddeepinfer=deepinfer_ref -c .deps/ref/model/cuda/$f.cu -o build-micro/ref_$f.o || exit 1
      ref+=(build-micro/ref_$f.o)
    done
    ref=(-DDEEPINFER_MICRO_REFERENCE "${ref[@]}")
  fi
  for f in sparse_attention index_scores index_topk; do
    $nvcc -std=c++17 -O3 -arch=sm_90 -lineinfo -I. -Xptxas -v -c model/cuda/$f.cu -o build-micro/$f.o >> "$out/micro_build.log" 2>&1 ||
      { cat "$out/micro_build.log"; exit 1; }
  done
  build_micro attention_micro || { cat "$out/micro_build.log"; exit 1; }
  grep -E "registers|spill" "$out/micro_build.log" | grep -v "0 bytes spill" | head -20
  if [ "$mode" = heads ]; then  # the variants, and without its copies (1), scores (2), P V (4): where its time goes
    build_micro heads_overlap -DDEEPINFER_HEADS_OVERLAP=1 || { cat "$out/micro_build.log"; exit 1; }
    build_micro heads_copiers2 -DDEEPINFER_HEADS_COPIERS=2 || exit 1
    build_micro heads_copiers2_overlap -DDEEPINFER_HEADS_COPIERS=2 -DDEEPINFER_HEADS_OVERLAP=1 || exit 1
    for skip in 1 2 4 6; do build_micro heads_skip$skip -DDEEPINFER_HEADS_SKIP=$skip || exit 1; done
    grep -E "registers|spill" "$out/micro_build.log" | grep -v "0 bytes spill" | sort | uniq -c
  fi
  if [ "$mode" = trace ]; then  # the split kernel's, the head-split kernel's and its timing-only builds
    build_micro trace -DDEEPINFER_SM90_TRACE=1 || { cat "$out/micro_build.log"; exit 1; }
    for skip in 1 6 8 16; do build_micro trace_skip$skip -DDEEPINFER_SM90_TRACE=1 -DDEEPINFER_HEADS_SKIP=$skip || exit 1; done
    build_micro trace_fence1 -DDEEPINFER_SM90_TRACE=1 -DDEEPINFER_HEADS_FENCE_ONCE=1 || exit 1
    build_micro trace_warp3 -DDEEPINFER_SM90_TRACE=1 -DDEEPINFER_SM90_TRACE_WARP=3 || exit 1
    build_micro heads_fence1 -DDEEPINFER_HEADS_FENCE_ONCE=1 || exit 1
  fi
  if [ "$mode" = merge ]; then  # the pair's merge: traced, and without its output stores (timing only)
    build_micro nostore -DDEEPINFER_SM90_SKIP=8 || { cat "$out/micro_build.log"; exit 1; }
    build_micro trace -DDEEPINFER_SM90_TRACE=1 || exit 1
  fi
  if [ "$mode" = rows ]; then  # picks as entry rows (--pick-rows 1): traced
    build_micro trace -DDEEPINFER_SM90_TRACE=1 || { cat "$out/micro_build.log"; exit 1; }
  fi
  if [ "$mode" = stages ]; then  # the split kernel with stages of 32 keys (four buffers), and both traced
    build_micro stages32 -DDEEPINFER_SM90_STAGE_KEYS=32 || { cat "$out/micro_build.log"; exit 1; }
    build_micro trace -DDEEPINFER_SM90_TRACE=1 || exit 1
    build_micro trace_stages32 -DDEEPINFER_SM90_TRACE=1 -DDEEPINFER_SM90_STAGE_KEYS=32 || exit 1
  fi
  if [ "$mode" = early ]; then  # traced
    build_micro trace -DDEEPINFER_SM90_TRACE=1 || { cat "$out/micro_build.log"; exit 1; }
  fi
  if [ "$mode" = dsmem ]; then
    $nvcc -std=c++17 -O3 "${sm90a[@]}" -I. tests/model/dsmem_probe.cu -o build-micro/dsmem_probe >> "$out/micro_build.log" 2>&1 ||
      { cat "$out/micro_build.log"; exit 1; }
  fi
  if [ "$mode" = gather ] || [ "$mode" = heads ]; then
    $nvcc -std=c++17 -O3 "${sm90a[@]}" -I. tests/model/gather_probe.cu -o build-micro/gather_probe >> "$out/micro_build.log" 2>&1 ||
      { cat "$out/micro_build.log"; exit 1; }
  fi
fi
[ $run = 1 ] || exit 0

if [ "$mode" = heads ]; then  # each line beside the default kernels' (the split kernel) in the same call
  for shape in "64 csa" "256 csa" "1 csa" "64 swa"; do
    for v in "attention_micro 0" "attention_micro 1" "heads_overlap 1" "heads_copiers2 1" "heads_copiers2_overlap 1"; do
      set -- $shape $v
      echo "$3 --head-split $4: $(build-micro/$3 attention --batch $1 --context 32768 --layer $2 --head-split $4 | tr '\n' ' ')"
    done
  done
  build-micro/gather_probe --rows 64  # its copies alone: all-cp.async-4w
  for skip in 1 2 4 6; do
    echo "heads_skip$skip: $(build-micro/heads_skip$skip attention --batch 64 --context 32768 --layer csa --head-split 1 | head -1)"
  done
fi
if [ "$mode" = trace ]; then
  for b in 64 1; do build-micro/trace attention --batch $b --context 32768 --layer csa | grep -v "vs reference\|reference median"; done
  for v in trace trace_warp3 trace_skip1 trace_skip6 trace_skip8 trace_skip16 trace_fence1; do
    for b in 64 1; do echo "== $v"; build-micro/$v attention --batch $b --context 32768 --layer csa --head-split 1 | grep -v "vs reference\|reference median"; done
  done
  for b in 64 1; do  # untraced, side by side: the split kernel, the head-split kernel, and with one fence a tile
    for v in "attention_micro 0" "attention_micro 1" "heads_fence1 1"; do
      set -- $v
      echo "$1 --head-split $2: $(build-micro/$1 attention --batch $b --context 32768 --layer csa --head-split $2 | head -1)"
    done
  done
fi
if [ "$mode" = merge ]; then
  build-micro/trace attention --batch 64 --context 32768 --layer csa | grep -E "median|trace:|point (19|60|61|62|63):"
  for shape in "64 csa" "64 hca" "256 csa" "1 csa"; do
    set -- $shape
    for v in attention_micro nostore attention_micro nostore; do echo "$v: $(build-micro/$v attention --batch $1 --context 32768 --layer $2 | tr '\n' ' ')"; done
  done
fi
if [ "$mode" = rows ]; then  # picks as entry ids and as entry rows, alternately, then both traced
  for shape in "64 csa" "256 csa" "1 csa"; do
    set -- $shape
    for r in 0 1 0 1; do echo "--pick-rows $r: $($M attention --batch $1 --context 32768 --layer $2 --pick-rows $r | tr '\n' ' ')"; done
  done
  for r in 0 1; do
    echo "== trace --pick-rows $r"
    build-micro/trace attention --batch 64 --context 32768 --layer csa --pick-rows $r | grep -E "median|trace:|point ( 0| 1| 2| 3| 4| 5| 8|60|61|62|63):"
  done
fi
if [ "$mode" = stages ]; then  # stages of 64 and 32 keys, alternately (picks as rows, as the forward passes them), then traced
  for shape in "64 csa 32768" "64 hca 32768" "256 csa 32768" "1 csa 32768" "64 hca 131072" "64 swa 32768"; do
    set -- $shape
    for v in attention_micro stages32 attention_micro stages32; do
      echo "$v $1 $2 $3: $(build-micro/$v attention --batch $1 --context $3 --layer $2 --pick-rows 1 | tr '\n' ' ')"
    done
  done
  for v in trace trace_stages32; do
    echo "== $v"
    build-micro/$v attention --batch 64 --context 32768 --layer csa --pick-rows 1 | grep -E "median|trace:|point ( 0| 1| 3| 4| 5| 6| 7| 8|12|16|20|24|28|32|36|40|43|60|61|62|63):"
  done
fi
if [ "$mode" = early ]; then  # the default launch and early inputs, alternately (picks as rows), then traced
  for shape in "64 csa 32768" "64 hca 32768" "256 csa 32768" "1 csa 32768" "64 hca 131072" "64 swa 32768"; do
    for e in 0 1 0 1; do
      set -- $shape
      echo "--early $e $1 $2 $3: $($M attention --batch $1 --context $3 --layer $2 --pick-rows 1 --early $e | tr '\n' ' ')"
    done
  done
  for e in 0 1; do
    echo "== trace --early $e"
    build-micro/trace attention --batch 64 --context 32768 --layer csa --pick-rows 1 --early $e | grep -E "median|trace:|point ( 0| 1| 2| 3| 4| 5| 6| 7| 8|12|16|60|61|62|63)[: ]"
  done
fi
if [ "$mode" = dsmem ]; then
  for c in 64 1; do build-micro/dsmem_probe --clusters $c || exit 1; done
fi
if [ "$mode" = gather ]; then
  for rows in 64 256; do build-micro/gather_probe --rows $rows || exit 1; done
fi
for l in csa hca swa; do $M attention --batch 64 --context 32768 --layer $l; done
$M attention --batch 256 --context 32768 --layer csa
$M attention --batch 64 --context 131072 --layer hca
$M attention --batch 1 --context 32768 --layer csa
$M attention --batch 64 --context 32768 --layer csa --hot 1
for c in 32768 131072; do $M indexer --batch 64 --context $c; done
if [ "$mode" = profile ]; then
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
