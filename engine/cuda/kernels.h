#pragma once
// The engine's CUDA kernels as ATen functions: the seam between the sampler's device-neutral
// code and the torch-free kernels beside this header (*.cu). kernels.cpp implements it in the
// CUDA build; kernels_absent.cpp in the CPU build, where *_supported() is false and the rest
// throw. Callers choose by the tensor's device at run time; no #if outside engine/cuda/.

#include <ATen/ATen.h>

#include <cstdint>

namespace deepinfer::engine::cuda {

// Gumbel noise (gumbel_noise.h): keys int64 [rows, 2] on CUDA, rows <= 65535 -> [rows, vocab]
// float32, bit for bit sampler_ops.h's ATen noise.
bool gumbel_noise_supported(const at::Tensor& keys);
at::Tensor gumbel_noise(const at::Tensor& keys, int64_t vocab_size);

}  // namespace deepinfer::engine::cuda
