#!/usr/bin/env bash
# The torch-free batch-invariant GEMM microbenchmark (tests/model/gemm_micro.cu) on the GPU machine:
# built with nvcc alone (seconds, no LibTorch), run beside cuBLAS on the V4 projections' shapes.
# `--build-only` builds here (nvcc needs no GPU) and stops; `--no-build` runs what build-micro/
# holds (carry it). GEMM_VARIANTS="NAME:FLAGS ..." (commas for spaces) also builds the kernel with
# those flags into build-micro/gemm_micro_NAME and runs it after the main binary. Other arguments
# go to every binary (e.g. --rows 1,64 --shapes wkv,head).
#   tests/gpu/gemm_micro.sh [--build-only|--no-build] [gemm_micro options]
set -uo pipefail
build=1 run=1
case "${1:-}" in
  --build-only) run=0; shift ;;
  --no-build) build=0; shift ;;
esac
out=${OUT:-/tmp}
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
compile() {  # compile NAME FLAGS...: build-micro/gemm_micro[_NAME]
  local name=$1; shift
  local bin=build-micro/gemm_micro${name:+_$name}
  $nvcc -std=c++17 -O3 -arch=sm_90 -lineinfo -I. -Xptxas -v "$@" -c model/cuda/dense_gemm.cu -o $bin.gemm.o >> "$out/gemm_micro_build.log" 2>&1 &&
    $nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo -I. -Xptxas -v "$@" -c model/cuda/dense_gemm_sm90.cu -o $bin.sm90.o \
      >> "$out/gemm_micro_build.log" 2>&1 &&
    $nvcc -std=c++17 -O3 -arch=sm_90 -lineinfo -I. -Xptxas -v "$@" -c model/cuda/dense_gemm_f32.cu -o $bin.f32.o >> "$out/gemm_micro_build.log" 2>&1 &&
    $nvcc -std=c++17 -O3 -arch=sm_90 -I. tests/model/gemm_micro.cu $bin.gemm.o $bin.sm90.o $bin.f32.o -lcublas -o $bin >> "$out/gemm_micro_build.log" 2>&1 ||
    { cat "$out/gemm_micro_build.log"; exit 1; }
}
if [ $build = 1 ]; then
  mkdir -p build-micro
  : > "$out/gemm_micro_build.log"
  compile ""
  for v in ${GEMM_VARIANTS:-}; do
    flags=${v#*:}
    compile "${v%%:*}" ${flags//,/ }
  done
  grep -E "spill" "$out/gemm_micro_build.log" | grep -v " 0 bytes spill" | head
fi
[ $run = 1 ] || exit 0
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
status=0
for bin in build-micro/gemm_micro build-micro/gemm_micro_*; do
  [ -x "$bin" ] && [ "${bin%.o}" = "$bin" ] || continue
  echo "== $bin"
  $bin "$@" || status=1
done
exit $status
