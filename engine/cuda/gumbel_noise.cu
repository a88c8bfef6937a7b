#include "engine/cuda/gumbel_noise.h"

#include "engine/cuda/noise_math.h"

namespace deepinfer::engine::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void gumbel_noise_kernel(const int64_t* keys, int64_t vocab, float* out) {
  const int64_t row = blockIdx.y;
  const uint64_t key = (static_cast<uint64_t>(keys[2 * row + 1]) << 32) | static_cast<uint64_t>(keys[2 * row]);
  float* dst = out + row * vocab;
  for (int64_t v = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; v < vocab;
       v += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[v] = noise_math::gumbel_noise(key, static_cast<uint32_t>(v));
  }
}

}  // namespace

cudaError_t gumbel_noise(const int64_t* keys, int64_t rows, int64_t vocab, float* out, cudaStream_t stream) {
  if (rows > kMaxRows) return cudaErrorInvalidValue;
  if (rows <= 0 || vocab <= 0) return cudaSuccess;
  const int64_t blocks = (vocab + kThreads - 1) / kThreads;
  const dim3 grid(static_cast<unsigned>(blocks < 1024 ? blocks : 1024), static_cast<unsigned>(rows));
  gumbel_noise_kernel<<<grid, kThreads, 0, stream>>>(keys, vocab, out);
  return cudaGetLastError();
}

}  // namespace deepinfer::engine::cuda
