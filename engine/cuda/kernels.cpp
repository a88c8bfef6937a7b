// The CUDA build's ATen bindings of engine/cuda/kernels.h.
#include "engine/cuda/kernels.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "engine/cuda/gumbel_noise.h"

namespace deepinfer::engine::cuda {

bool gumbel_noise_supported(const at::Tensor& keys) {
  return keys.is_cuda() && keys.scalar_type() == at::kLong && keys.dim() == 2 && keys.size(1) == 2 && keys.size(0) <= kMaxRows;
}

at::Tensor gumbel_noise(const at::Tensor& keys, int64_t vocab_size) {
  TORCH_CHECK(gumbel_noise_supported(keys), "cuda::gumbel_noise: int64 CUDA keys [rows <= ", kMaxRows, ", 2] expected, got ", keys.scalar_type(),
              " ", keys.sizes(), " on ", keys.device());
  const at::Tensor k = keys.contiguous();
  at::Tensor out = at::empty({k.size(0), vocab_size}, k.options().dtype(at::kFloat));
  const c10::cuda::CUDAGuard guard(k.device());
  const cudaError_t error =
      cuda::gumbel_noise(k.data_ptr<int64_t>(), k.size(0), vocab_size, out.data_ptr<float>(), c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(error == cudaSuccess, "gumbel_noise: ", cudaGetErrorString(error));
  return out;
}

}  // namespace deepinfer::engine::cuda
