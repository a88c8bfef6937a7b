#pragma once
// CUDA kernel for mHC's comb normalization (model/hyper_connection.h): one thread per token
// does the whole softmax + Sinkhorn loop on its n x n matrix in registers, instead of ~6 ATen
// launches per iteration. Plain CUDA, no torch types. Reference: sinkhorn_reference() there.

#include <cstdint>

#include <cuda_runtime_api.h>

namespace deepinfer::model::cuda {

inline constexpr int kSinkhornMaxN = 8;

// logits, out: float32 [tokens, n, n] contiguous (may alias). Per token: softmax over the last
// dim + eps, divide by column sums + eps, then (iters - 1) times rows then columns.
// cudaErrorInvalidValue unless n is 1, 2, 4 or 8 and iters >= 1; else the launch's error.
cudaError_t sinkhorn(const float* logits, float* out, int64_t tokens, int n, int iters, float eps, cudaStream_t stream);

}  // namespace deepinfer::model::cuda
