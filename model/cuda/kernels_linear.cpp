// The CUDA build's ATen bindings of model/cuda/kernels.h's batch-invariant linears
// (dense_gemm.h); the rest of kernels.h is implemented by kernels.cpp, kernels_attention.cpp and
// kernels_fp8.cpp (kept apart so that no file passes style.md's 500 lines).
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdint>
#include <string>
#include <vector>

#include "model/cuda/binding_util.h"
#include "model/cuda/dense_gemm.h"
#include "model/cuda/kernels.h"

namespace deepinfer::model::cuda {

using namespace binding;  // check, stream_of, aligned16, tensor_cores_on

namespace {

// The row stride, in elements, that the kernels' 16-byte copies need.
int64_t row_multiple(at::ScalarType type) { return type == at::kBFloat16 ? 8 : 4; }

// A [rows, K] operand the kernels read in place: unit inner stride, 16-byte aligned rows.
bool rows_fit(const at::Tensor& t) {
  return t.dim() == 2 && t.stride(1) == 1 && t.stride(0) >= t.size(1) && t.stride(0) % row_multiple(t.scalar_type()) == 0 && aligned16(t);
}

int64_t rows_of(const at::Tensor& x) { return x.size(-1) > 0 ? x.numel() / x.size(-1) : 0; }

constexpr int64_t kMaxRows = (int64_t{1} << 31) - 257;  // dense_gemm.h: M below 2^31 - 256

// The float32 scratch of a split reduction (undefined when none is needed).
at::Tensor workspace_for(int64_t bytes, at::Device device) {
  if (bytes == 0) return {};
  return at::empty({bytes / static_cast<int64_t>(sizeof(float))}, at::TensorOptions().device(device).dtype(at::kFloat));
}

}  // namespace

bool invariant_linear_supported(const at::Tensor& x, const at::Tensor& w) {
  if (!x.defined() || !w.defined() || !x.is_cuda() || !w.is_cuda() || x.device() != w.device() || x.dim() < 1 || w.dim() != 2 ||
      x.scalar_type() != w.scalar_type() || x.size(-1) != w.size(1) || rows_of(x) > kMaxRows || !rows_fit(w))
    return false;
  const int64_t n = w.size(0), k = w.size(1);
  if (x.scalar_type() == at::kBFloat16) return dense_gemm_bf16_shape_supported(n, k) && tensor_cores_on(x.device());
  return x.scalar_type() == at::kFloat && dense_gemm_f32_shape_supported(n, k);
}

at::Tensor invariant_linear(const at::Tensor& x, const at::Tensor& w, at::ScalarType out_dtype) {
  TORCH_CHECK(x.defined() && w.defined(), "cuda::invariant_linear: x and w must be defined");
  TORCH_CHECK(x.is_cuda() && w.is_cuda() && x.device() == w.device(), "cuda::invariant_linear: x and w must be on one CUDA device, got ",
              x.device(), " and ", w.device());
  TORCH_CHECK(x.dim() >= 1 && w.dim() == 2 && x.size(-1) == w.size(1), "cuda::invariant_linear: x [..., K] and w [N, K] expected, got ",
              x.sizes(), " and ", w.sizes());
  const at::ScalarType type = x.scalar_type();
  TORCH_CHECK(type == w.scalar_type() && (type == at::kBFloat16 || type == at::kFloat),
              "cuda::invariant_linear: x and w must be both bfloat16 or both float32, got ", type, " and ", w.scalar_type());
  const bool bf16 = type == at::kBFloat16;
  TORCH_CHECK(out_dtype == at::kFloat || (bf16 && out_dtype == at::kBFloat16), "cuda::invariant_linear: ", type, " inputs give float32",
              bf16 ? " or bfloat16" : "", ", not ", out_dtype);
  const int64_t N = w.size(0), K = w.size(1);
  TORCH_CHECK(bf16 ? dense_gemm_bf16_shape_supported(N, K) : dense_gemm_f32_shape_supported(N, K), "cuda::invariant_linear: ", type,
              " needs K a positive multiple of ", bf16 ? 32 : 4, " and N >= 1, got N ", N, ", K ", K);
  TORCH_CHECK(rows_fit(w), "cuda::invariant_linear: w needs unit inner stride, a row stride that is a multiple of ", row_multiple(type),
              " elements and 16-byte alignment, got strides ", w.strides(), " at ", w.data_ptr());
  TORCH_CHECK(!bf16 || tensor_cores_on(x.device()), "cuda::invariant_linear: bfloat16 needs a GPU of sm_80 or later, ", x.device(),
              " is older");
  TORCH_CHECK(rows_of(x) <= kMaxRows, "cuda::invariant_linear: ", rows_of(x), " rows are more than the kernels index");
  std::vector<int64_t> out_sizes(x.sizes().begin(), x.sizes().end());
  out_sizes.back() = N;
  at::Tensor rows = x.reshape({-1, K});  // [M, K], a view where x's layout allows
  if (!rows_fit(rows)) rows = rows.clone(at::MemoryFormat::Contiguous);
  at::Tensor out = at::empty({rows.size(0), N}, x.options().dtype(out_dtype));  // [M, N]
  if (rows.size(0) == 0) return out.view(out_sizes);
  const c10::cuda::CUDAGuard guard(x.device());
  const cudaStream_t stream = stream_of(x);
  if (bf16) {
    DenseGemmBf16Args a;
    a.x = reinterpret_cast<const __nv_bfloat16*>(rows.data_ptr());
    a.w = reinterpret_cast<const __nv_bfloat16*>(w.data_ptr());
    a.y = out.data_ptr();
    a.ldx = rows.stride(0);
    a.ldw = w.stride(0);
    a.ldy = N;
    a.m = rows.size(0);
    a.n = N;
    a.k = K;
    a.out_float32 = out_dtype == at::kFloat;
    const at::Tensor workspace = workspace_for(dense_gemm_bf16_workspace_bytes(a.m, N, K), x.device());
    a.workspace = workspace.defined() ? workspace.data_ptr<float>() : nullptr;
    check(dense_gemm_bf16(a, stream), "dense_gemm_bf16");
  } else {
    DenseGemmF32Args a;
    a.x = rows.data_ptr<float>();
    a.w = w.data_ptr<float>();
    a.y = out.data_ptr<float>();
    a.ldx = rows.stride(0);
    a.ldw = w.stride(0);
    a.ldy = N;
    a.m = rows.size(0);
    a.n = N;
    a.k = K;
    const at::Tensor workspace = workspace_for(dense_gemm_f32_workspace_bytes(a.m, N, K), x.device());
    a.workspace = workspace.defined() ? workspace.data_ptr<float>() : nullptr;
    check(dense_gemm_f32(a, stream), "dense_gemm_f32");
  }
  return out.view(out_sizes);
}

at::Tensor invariant_group_linear(const at::Tensor& x, const at::Tensor& w) {
  TORCH_CHECK(x.defined() && w.defined() && x.is_cuda() && w.is_cuda() && x.device() == w.device(),
              "cuda::invariant_group_linear: x and w must be defined on one CUDA device");
  TORCH_CHECK(x.dim() == 3 && w.dim() == 3 && x.size(1) == w.size(0) && x.size(2) == w.size(2),
              "cuda::invariant_group_linear: x [T, G, K] and w [G, N, K] expected, got ", x.sizes(), " and ", w.sizes());
  TORCH_CHECK(x.scalar_type() == at::kBFloat16 && w.scalar_type() == at::kBFloat16,
              "cuda::invariant_group_linear: bfloat16 x and w expected, got ", x.scalar_type(), " and ", w.scalar_type());
  const int64_t T = x.size(0), G = x.size(1), N = w.size(1), K = x.size(2);
  TORCH_CHECK(dense_gemm_bf16_shape_supported(N, K) && G <= 65535 && T <= kMaxRows,
              "cuda::invariant_group_linear: needs K a positive multiple of 32 and at most 65535 groups, got G ", G, ", N ", N, ", K ", K);
  TORCH_CHECK(tensor_cores_on(x.device()), "cuda::invariant_group_linear: bfloat16 needs a GPU of sm_80 or later, ", x.device(),
              " is older");
  const at::Tensor xs = x.stride(2) == 1 && x.stride(1) % 8 == 0 && x.stride(0) % 8 == 0 && aligned16(x) ? x : x.contiguous();
  const at::Tensor ws = w.is_contiguous() && aligned16(w) ? w : w.contiguous();
  at::Tensor out = at::empty({T, G * N}, x.options());  // group g's outputs in columns [g N, (g + 1) N)
  if (T == 0) return out;
  const c10::cuda::CUDAGuard guard(x.device());
  DenseGemmBf16Args a;
  a.x = reinterpret_cast<const __nv_bfloat16*>(xs.data_ptr());
  a.w = reinterpret_cast<const __nv_bfloat16*>(ws.data_ptr());
  a.y = out.data_ptr();
  a.ldx = xs.stride(0), a.ldw = K, a.ldy = G * N;
  a.m = T, a.n = N, a.k = K;
  a.groups = G, a.gx = xs.stride(1), a.gw = N * K, a.gy = N;
  const at::Tensor workspace = workspace_for(dense_gemm_bf16_workspace_bytes(T, N, K, G), x.device());
  a.workspace = workspace.defined() ? workspace.data_ptr<float>() : nullptr;
  check(dense_gemm_bf16(a, stream_of(x)), "dense_gemm_bf16 (groups)");
  return out;
}

std::string invariant_linear_plan(int64_t rows, const at::Tensor& w) {
  TORCH_CHECK(w.defined() && w.is_cuda() && w.dim() == 2, "cuda::invariant_linear_plan: a CUDA w [N, K] expected");
  int sms = 0, major = 0, minor = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, w.device().index()), "cudaDeviceGetAttribute");
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, w.device().index()), "cudaDeviceGetAttribute");
  check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, w.device().index()), "cudaDeviceGetAttribute");
  const int64_t N = w.size(0), K = w.size(1);
  return w.scalar_type() == at::kFloat ? dense_gemm_f32_plan(rows, N, K, sms)
                                       : dense_gemm_bf16_plan(rows, N, K, sms, major == 9 && minor == 0);
}

}  // namespace deepinfer::model::cuda
