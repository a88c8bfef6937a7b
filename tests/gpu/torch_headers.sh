#!/usr/bin/env bash
# On the GPU machine: packs the CUDA LibTorch's headers into $OUT/torch-include.tar.xz (a few MB),
# so that the CUDA build's C++ files can be syntax-checked on the CPU machine, which has the CUDA
# toolkit but only a CPU LibTorch (launch/cuda_syntax_check.sh). Run once a session, beside the
# build:   tests/gpu/torch_headers.sh
set -euo pipefail
out=${OUT:-/tmp}
root=$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))')
tar -C "$root" -cJf "$out/torch-include.tar.xz" include
python3 -c 'import torch; print("torch", torch.__version__)' > "$out/torch-version.txt"
ls -la "$out/torch-include.tar.xz"
