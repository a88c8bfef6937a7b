// The CUDA build's ATen bindings of model/cuda/kernels.h.
#include "model/cuda/kernels.h"

#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <string>

#include "model/cuda/fp4_dequant.h"
#include "model/cuda/sinkhorn.h"
#include "model/quant.h"

namespace deepinfer::model::cuda {
namespace {

void check(cudaError_t error, const char* kernel) { TORCH_CHECK(error == cudaSuccess, kernel, ": ", cudaGetErrorString(error)); }

cudaStream_t stream_of(const at::Tensor& t) { return c10::cuda::getCurrentCUDAStream(t.device().index()).stream(); }

bool aligned16(const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; }

}  // namespace

bool built() { return true; }

bool sinkhorn_supported(const at::Tensor& logits, int64_t iters) {
  if (!logits.is_cuda() || logits.scalar_type() != at::kFloat || logits.dim() < 2 || iters < 1) return false;
  const int64_t n = logits.size(-1);
  return logits.size(-2) == n && (n == 1 || n == 2 || n == 4 || n == 8);
}

at::Tensor sinkhorn(const at::Tensor& logits, int64_t iters, double eps) {
  TORCH_CHECK(sinkhorn_supported(logits, iters), "cuda::sinkhorn: float32 CUDA [..., n, n] with n in {1, 2, 4, 8} expected, got ",
              logits.scalar_type(), " ", logits.sizes(), " on ", logits.device(), ", iters ", iters);
  const at::Tensor in = logits.contiguous();
  at::Tensor out = at::empty_like(in);
  const int64_t n = in.size(-1);
  const c10::cuda::CUDAGuard guard(in.device());
  check(model::cuda::sinkhorn(in.data_ptr<float>(), out.data_ptr<float>(), in.numel() / (n * n), static_cast<int>(n),
                              static_cast<int>(iters), static_cast<float>(eps), stream_of(in)),
        "sinkhorn");
  return out;
}

bool dequant_fp4_supported(const at::Tensor& packed, const at::Tensor& scale, int64_t block, at::ScalarType out_dtype) {
  return packed.is_cuda() && out_dtype == at::kBFloat16 && block == kFp4Block && (2 * packed.size(-1)) % kFp4Block == 0 &&
         packed.is_contiguous() && scale.is_contiguous() && aligned16(packed);
}

at::Tensor dequant_fp4(const at::Tensor& packed, const at::Tensor& scale) {
  TORCH_CHECK(dequant_fp4_supported(packed, scale, kFp4Block, at::kBFloat16), "cuda::dequant_fp4: contiguous, aligned CUDA uint8 packed ",
              packed.sizes(), " with 32-column blocks expected");
  const int64_t cols = 2 * packed.size(-1);
  std::vector<int64_t> sizes(packed.sizes().begin(), packed.sizes().end());
  sizes.back() = cols;
  at::Tensor out = at::empty(sizes, packed.options().dtype(at::kBFloat16));
  if (out.numel() == 0) return out;
  const c10::cuda::CUDAGuard guard(packed.device());
  check(dequant_fp4_to_bf16_one(packed.data_ptr<uint8_t>(), scale.data_ptr<uint8_t>(), out.numel() / cols, cols,
                                reinterpret_cast<uint16_t*>(out.data_ptr()), stream_of(packed)),
        "dequant_fp4_to_bf16_one");
  return out;
}

void dequant_fp4_tables(const at::Tensor& packed_table, const at::Tensor& scale_table, const at::Tensor& active, at::Tensor& out) {
  const int64_t count = packed_table.numel();
  TORCH_CHECK(out.is_cuda() && out.scalar_type() == at::kBFloat16 && out.dim() == 3 && out.size(0) == count && out.is_contiguous(),
              "cuda::dequant_fp4_tables: out must be contiguous bfloat16 CUDA [", count, ", rows, cols], got ", out.sizes());
  TORCH_CHECK(scale_table.numel() == count && active.numel() == count && packed_table.scalar_type() == at::kLong &&
                  scale_table.scalar_type() == at::kLong && active.scalar_type() == at::kLong,
              "cuda::dequant_fp4_tables: int64 tables of ", count, " entries expected");
  const c10::cuda::CUDAGuard guard(out.device());
  check(dequant_fp4_to_bf16(reinterpret_cast<const uint64_t*>(packed_table.data_ptr<int64_t>()),
                            reinterpret_cast<const uint64_t*>(scale_table.data_ptr<int64_t>()), active.data_ptr<int64_t>(), count,
                            out.size(1), out.size(2), reinterpret_cast<uint16_t*>(out.data_ptr()), stream_of(out)),
        "dequant_fp4_to_bf16");
}

at::Generator make_generator(uint64_t seed, at::Device device) {
  TORCH_CHECK(device.is_cuda(), "cuda::make_generator: ", device, " is not a CUDA device");
  at::Generator gen = at::make_generator<at::CUDAGeneratorImpl>(device.index());
  gen.set_current_seed(seed);
  return gen;
}

}  // namespace deepinfer::model::cuda
