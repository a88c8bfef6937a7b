#include "engine/cuda/gumbel_noise.h"

#include <stdexcept>
#include <string>

#include "engine/sampler_noise_math.h"

namespace deepinfer::engine::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void gumbel_noise_kernel(const int64_t* keys, int64_t vocab, float* out) {
  const int64_t row = blockIdx.y;
  const uint64_t key = (static_cast<uint64_t>(keys[2 * row + 1]) << 32) | static_cast<uint64_t>(keys[2 * row]);
  float* dst = out + row * vocab;
  for (int64_t v = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; v < vocab; v += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[v] = noise_math::gumbel_noise(key, static_cast<uint32_t>(v));
  }
}

}  // namespace

void gumbel_noise(const int64_t* keys, int64_t rows, int64_t vocab, float* out, cudaStream_t stream) {
  if (rows <= 0 || vocab <= 0) return;
  if (rows > 65535) throw std::invalid_argument("gumbel_noise: " + std::to_string(rows) + " rows, at most 65535");
  const int64_t blocks = (vocab + kThreads - 1) / kThreads;
  const dim3 grid(static_cast<unsigned>(blocks < 1024 ? blocks : 1024), static_cast<unsigned>(rows));
  gumbel_noise_kernel<<<grid, kThreads, 0, stream>>>(keys, vocab, out);
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) throw std::runtime_error(std::string("gumbel_noise: ") + cudaGetErrorString(error));
}

}  // namespace deepinfer::engine::cuda
