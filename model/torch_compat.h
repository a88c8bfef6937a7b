#pragma once
// The one place that knows LibTorch versions apart: this project builds against LibTorch 1.13
// (Debian, CPU) and 2.11 (PyTorch's CUDA wheel). Everything version-dependent goes through here.

#include <ATen/ATen.h>
#include <torch/version.h>

namespace deepinfer::compat {

// at::_grouped_mm (bfloat16, CUDA sm90) arrived in LibTorch 2.8.
inline constexpr bool kHasGroupedMm = TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 8);

// a [M, K] rows sorted by group, b [G, K, N], offs int32 [G] cumulative group ends -> [M, N];
// rows past offs[G-1] are not written. Throws where the LibTorch has no grouped GEMM.
inline at::Tensor grouped_mm(const at::Tensor& a, const at::Tensor& b, const at::Tensor& offs) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 8)
  return at::_grouped_mm(a, b, offs);
#else
  (void)a, (void)b, (void)offs;
  TORCH_CHECK(false, "grouped_mm needs LibTorch >= 2.8, this is ", TORCH_VERSION);
#endif
}

}  // namespace deepinfer::compat
