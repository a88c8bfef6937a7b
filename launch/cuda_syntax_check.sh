#!/usr/bin/env bash
# Syntax-checks C++ files of the CUDA build on this (CPU) machine: g++ -fsyntax-only with the CUDA
# toolkit at /usr/local/cuda and the CUDA LibTorch's headers that tests/gpu/torch_headers.sh
# brought from the GPU machine (unpack it: mkdir -p .deps/torch-cuda && tar -C .deps/torch-cuda
# -xJf torch-include.tar.xz). Catches what only the CUDA build compiles (engine/cuda/kernels.cpp,
# model/cuda/kernels*.cpp, the CUDA tests) before a device call does.
#   launch/cuda_syntax_check.sh [FILE.cpp ...]   (default: every *.cpp the CUDA build alone compiles)
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
inc=$root/.deps/torch-cuda/include
[ -d "$inc" ] || { echo "no $inc: run tests/gpu/torch_headers.sh on the GPU machine and unpack its archive there"; exit 2; }
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  files=(engine/cuda/kernels.cpp engine/cuda/kernel_busy.cpp model/cuda/kernels.cpp model/cuda/kernels_attention.cpp model/cuda/kernels_fp8.cpp
    model/cuda/kernels_linear.cpp tests/engine/model_runner_cuda_test.cpp tests/engine/sampler_cuda_sync_test.cpp tests/engine/kernel_busy_cuda_test.cpp
    tests/model/dense_gemm_cuda_test.cpp)
fi
fail=0
for f in "${files[@]}"; do
  if g++ -std=c++20 -fsyntax-only -D_GLIBCXX_USE_CXX11_ABI=1 -I"$root" -I"$inc" -I"$inc/torch/csrc/api/include" \
    -I/usr/local/cuda/include -I/usr/include/simdjson "$root/$f" 2> /tmp/cuda_syntax.log; then
    echo "ok: $f"
  else
    echo "FAIL: $f"; head -30 /tmp/cuda_syntax.log; fail=1
  fi
done
exit $fail
