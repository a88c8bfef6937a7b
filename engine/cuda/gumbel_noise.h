#pragma once
// The sampler's Gumbel noise as one CUDA kernel: out[b, v] = gumbel_noise(key_b, v) of
// sampler_noise.h, computed by the same inline code (noise_math.h, compiled with
// --fmad=false), so it equals the CPU reference bit for bit. Replaces ~100 elementwise ATen
// launches of sampler_ops.h's tensor path. Plain CUDA, no torch types.

#include <cstdint>

#include <cuda_runtime_api.h>

namespace deepinfer::engine::cuda {

// keys: device int64 [rows, 2], the (lo, hi) lanes of mix_seed, each in [0, 2^32);
// out: device float32 [rows, vocab]. cudaErrorInvalidValue for rows > kMaxRows.
inline constexpr int64_t kMaxRows = 65535;
cudaError_t gumbel_noise(const int64_t* keys, int64_t rows, int64_t vocab, float* out, cudaStream_t stream);

}  // namespace deepinfer::engine::cuda
