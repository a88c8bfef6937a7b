// The CUDA build's ATen bindings of model/cuda/kernels.h's FP8 linears (act_quant.h,
// fp8_gemm.h); the rest of kernels.h is implemented by kernels.cpp and kernels_linear.cpp (kept
// apart so that no file passes style.md's 500 lines).
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdint>
#include <vector>

#include "model/cuda/act_quant.h"
#include "model/cuda/binding_util.h"
#include "model/cuda/fp8_gemm.h"
#include "model/cuda/kernels.h"
#include "model/quant.h"

namespace deepinfer::model::cuda {

using namespace binding;  // check, stream_of, aligned16

namespace {

int64_t blocks_of(int64_t cols) { return (cols + kActQuantBlock - 1) / kActQuantBlock; }

// x's rows [M, K] quantized into act_quant's padded buffers: codes [M4, K], scales [ceil(K/128), M4].
struct QuantizedRows {
  at::Tensor codes, scales;
  int64_t rows = 0, padded_rows = 0;
};

QuantizedRows quantize_rows(const at::Tensor& x) {
  const int64_t K = x.size(-1);
  at::Tensor rows = x.reshape({-1, K}).contiguous();
  if (reinterpret_cast<uintptr_t>(rows.data_ptr()) % 8 != 0) rows = rows.clone();
  QuantizedRows q;
  q.rows = rows.size(0);
  q.padded_rows = fp8_gemm_rows(q.rows);
  q.codes = at::empty({q.padded_rows, K}, x.options().dtype(at::kByte));
  q.scales = at::empty({blocks_of(K), q.padded_rows}, x.options().dtype(at::kFloat));
  ActQuantArgs a;
  a.x = reinterpret_cast<const __nv_bfloat16*>(rows.data_ptr());
  a.codes = q.codes.data_ptr<uint8_t>();
  a.scales = q.scales.data_ptr<float>();
  a.rows = q.rows;
  a.padded_rows = q.padded_rows;
  a.cols = K;
  a.scale_row_stride = 1;
  a.scale_block_stride = q.padded_rows;
  check(model::cuda::act_quant(a, stream_of(x)), "act_quant");
  return q;
}

// Compute capability exactly 9.0: cuBLASLt's 1D / 2D block-scaled FP8 runs on Hopper only.
bool hopper(at::Device device) {
  const int index = device.has_index() ? device.index() : c10::cuda::current_device();
  int major = 0, minor = 0;
  return cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, index) == cudaSuccess &&
         cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, index) == cudaSuccess && major == 9 && minor == 0;
}

// The weight's scales as cuBLASLt's BLK128x128 mode reads them: [ceil(N/128), S] float32, S =
// ceil(K/128) rounded up to 4, 16-byte aligned: w_scale itself where it is laid out so (every V4
// shape: K/128 is a multiple of 4), else a zero-padded copy.
at::Tensor gemm_weight_scales(const at::Tensor& w_scale, int64_t K) {
  const int64_t stride = fp8_gemm_scale_stride(K);
  if (w_scale.stride(1) == 1 && (w_scale.stride(0) == stride || w_scale.size(0) == 1) && aligned16(w_scale)) return w_scale;
  at::Tensor padded = at::zeros({w_scale.size(0), stride}, w_scale.options());
  padded.narrow(1, 0, w_scale.size(1)).copy_(w_scale);
  return padded;
}

// The process's cuBLASLt handle and algorithm cache, never destroyed (a handle destroyed after
// the CUDA runtime's own teardown at exit fails).
Fp8Gemm& fp8_gemm() {
  static Fp8Gemm* const gemm = new Fp8Gemm();
  return *gemm;
}

}  // namespace

bool act_quant_supported(const at::Tensor& x) {
  return x.is_cuda() && x.scalar_type() == at::kBFloat16 && x.dim() >= 1 && act_quant_shape_supported(x.size(-1));
}

Fp8Activations act_quant(const at::Tensor& x) {
  TORCH_CHECK(act_quant_supported(x), "cuda::act_quant: bfloat16 CUDA x [..., K] with K a positive multiple of 4 expected, got ",
              x.scalar_type(), " ", x.sizes(), " on ", x.device());
  const c10::cuda::CUDAGuard guard(x.device());
  const QuantizedRows q = quantize_rows(x);
  std::vector<int64_t> scale_sizes(x.sizes().begin(), x.sizes().end());
  scale_sizes.back() = q.scales.size(0);
  return {q.codes.narrow(0, 0, q.rows).view(x.sizes()), q.scales.narrow(1, 0, q.rows).t().view(scale_sizes)};
}

bool fp8_linear_supported(const at::Tensor& x, const at::Tensor& w_fp8, const at::Tensor& w_scale) {
  if (!x.is_cuda() || x.scalar_type() != at::kBFloat16 || x.dim() < 1) return false;
  if (w_fp8.device() != x.device() || w_fp8.scalar_type() != at::kByte || w_fp8.dim() != 2 || !w_fp8.is_contiguous() || !aligned16(w_fp8))
    return false;
  const int64_t N = w_fp8.size(0), K = w_fp8.size(1);
  if (x.size(-1) != K || !fp8_gemm_shape_supported(N, K)) return false;
  if (w_scale.device() != x.device() || w_scale.scalar_type() != at::kFloat ||
      w_scale.sizes() != at::IntArrayRef({(N + 127) / 128, blocks_of(K)}))
    return false;
  return hopper(x.device()) && fp8_gemm_cublaslt_version() >= kFp8GemmMinCublasLtVersion;
}

at::Tensor fp8_linear(const at::Tensor& x, const at::Tensor& w_fp8, const at::Tensor& w_scale) {
  TORCH_CHECK(fp8_linear_supported(x, w_fp8, w_scale),
              "cuda::fp8_linear: bfloat16 CUDA x [..., K], contiguous 16-byte aligned uint8 w [N, K] and float32 w_scale [ceil(N/128), "
              "ceil(K/128)] on one device of compute capability 9.0, cuBLASLt >= 12.9, K a multiple of 16 and N of 8 expected; got x ",
              x.scalar_type(), " ", x.sizes(), " on ", x.device(), ", w ", w_fp8.scalar_type(), " ", w_fp8.sizes(), " on ", w_fp8.device(),
              ", w_scale ", w_scale.scalar_type(), " ", w_scale.sizes(), " on ", w_scale.device(), ", cuBLASLt ",
              fp8_gemm_cublaslt_version());
  const int64_t N = w_fp8.size(0), K = w_fp8.size(1);
  std::vector<int64_t> out_sizes(x.sizes().begin(), x.sizes().end());
  out_sizes.back() = N;
  const c10::cuda::CUDAGuard guard(x.device());
  const QuantizedRows q = quantize_rows(x);
  if (q.rows == 0) return at::empty(out_sizes, x.options());
  const at::Tensor scale = gemm_weight_scales(w_scale, K);
  at::Tensor y = at::empty({q.padded_rows, N}, x.options());
  // From the caching allocator, stream-ordered (the GEMM's split-K partials).
  const at::Tensor workspace = at::empty({static_cast<int64_t>(kFp8GemmWorkspaceBytes)}, x.options().dtype(at::kByte));
  Fp8GemmArgs a;
  a.x = q.codes.data_ptr<uint8_t>();
  a.x_scale = q.scales.data_ptr<float>();
  a.w = w_fp8.data_ptr<uint8_t>();
  a.w_scale = scale.data_ptr<float>();
  a.y = reinterpret_cast<__nv_bfloat16*>(y.data_ptr());
  a.rows = q.padded_rows;
  a.n = N;
  a.k = K;
  a.workspace = workspace.data_ptr();
  a.workspace_bytes = kFp8GemmWorkspaceBytes;
  const cublasStatus_t status = fp8_gemm().run(a, stream_of(x));
  TORCH_CHECK(status == CUBLAS_STATUS_SUCCESS, "cuda::fp8_linear: cuBLASLt ", fp8_gemm_cublaslt_version(), " block-scaled FP8 GEMM of ",
              q.rows, " x ", N, " x ", K, " (M x N x K) failed: ", fp8_gemm_status_name(status),
              status == CUBLAS_STATUS_NOT_SUPPORTED ? " (no algorithm for this shape on this device)" : "");
  return y.narrow(0, 0, q.rows).view(out_sizes);
}

}  // namespace deepinfer::model::cuda
