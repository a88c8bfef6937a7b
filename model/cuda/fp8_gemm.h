#pragma once
// FP8 linears multiplied straight from FP8 on Hopper: y [M, N] bfloat16 = x [M, K] W [N, K]^T
// with x quantized per row and 128 columns (act_quant.h) and W in e4m3 with one float32 scale per
// 128 x 128 block (the checkpoint's codes; its e8m0 scales decoded), through cuBLASLt's
// block-scaled FP8 GEMM. No bfloat16 copy of W exists. Host code calling cuBLASLt; no torch types.
// Owns: a cuBLASLt handle and the algorithm chosen for each (device, row bucket, N, K,
// alignments). Does not own: quantizing x, any memory (the caller passes every buffer), or how
// the weights are loaded.
//
// What cuBLASLt offers (cuBLAS docs, "128-element 1D and 128x128 2D Block Scaling for FP8 Data
// Types" and cublasLtMatmul(); cuBLAS 12.9 added the modes): on compute capability 9.0 only, A
// and B e4m3 (or e5m2) with CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F (one float32 per 128
// consecutive K values of a row) or BLK128x128_32F (one per 128 x 128 block) for each, any pair
// but both 128 x 128; D bfloat16, float16 or float32; "TN" (A transposed, B not);
// CUBLAS_COMPUTE_32F with CUDA_R_32F scales; M and N multiples of 4; every matrix dimension and
// pointer 16-byte aligned; scale tensors 16-byte aligned, VEC128 ones M-major (A) or N-major (B)
// [M or N, ceil(K/128)], BLK128x128 ones K-major with the stride between columns ceil(K/128)
// rounded up to 4.
//
// The call. cuBLAS is column-major: D[m, n] = op(A) op(B). Here A = W (m = N; W [N, K] row-major
// is K x N column-major, transposed), B = x (n = M4; x [M4, K] row-major is K x M4 column-major,
// not transposed), D = y (y [M4, N] row-major is N x M4 column-major). Hence:
//   x       [M4, K] e4m3, M4 = M rounded up to 4 (rows past M zero: act_quant writes them)
//   x_scale [ceil(K/128), M4] float32 (B's VEC128 scales, M4-major)
//   w       [N, K] e4m3
//   w_scale [ceil(N/128), S] float32, S = ceil(K/128) rounded up to 4 (A's BLK128x128 scales)
//   y       [M4, N] bfloat16
// with K a multiple of 16 and N of 8 (16-byte rows of W, x and y). K and N need not be multiples
// of 128 (the last blocks are partial), as far as the documentation goes.
// Arithmetic: per 128-column block the e4m3 products are summed on the tensor cores, scaled by
// the two blocks' scales and added in float32 (no fast accumulation), then rounded to bfloat16
// once. Reproducible for a fixed algorithm; rows of one bucket share one.

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>

namespace deepinfer::model::cuda {

struct Fp8GemmArgs {
  const uint8_t* x = nullptr;      // [rows, k] e4m3
  const float* x_scale = nullptr;  // [ceil(k/128), rows]
  const uint8_t* w = nullptr;      // [n, k] e4m3
  const float* w_scale = nullptr;  // [ceil(n/128), fp8_gemm_scale_stride(k)]
  __nv_bfloat16* y = nullptr;      // [rows, n]
  int64_t rows = 0;                // M4: a multiple of 4
  int64_t n = 0;
  int64_t k = 0;
  void* workspace = nullptr;  // 256-byte aligned
  size_t workspace_bytes = 0;
};

// cuBLAS's advice for Hopper: 32 MiB (split-K partials).
inline constexpr size_t kFp8GemmWorkspaceBytes = size_t{32} << 20;
// The block-scaled modes arrived in cuBLAS 12.9 (cublasLtGetVersion() 120900).
inline constexpr size_t kFp8GemmMinCublasLtVersion = 120900;

int64_t fp8_gemm_rows(int64_t m);          // m rounded up to 4
int64_t fp8_gemm_scale_stride(int64_t k);  // ceil(k/128) rounded up to 4
// n > 0 a multiple of 8, k > 0 a multiple of 16.
bool fp8_gemm_shape_supported(int64_t n, int64_t k);
// The rows whose algorithm a call of `rows` rows uses: the next power of two (at least 4) up to
// 256, then the next multiple of 256.
int64_t fp8_gemm_bucket(int64_t rows);
size_t fp8_gemm_cublaslt_version();  // the library's, at run time
const char* fp8_gemm_status_name(cublasStatus_t status);

class Fp8Gemm final {
 public:
  Fp8Gemm();  // creates the handle (a cuBLASLt handle is tied to no device or context)
  ~Fp8Gemm();
  Fp8Gemm(const Fp8Gemm&) = delete;
  Fp8Gemm& operator=(const Fp8Gemm&) = delete;

  // y = x w^T on the current device, queued on `stream`. The first call of a (device, bucket, n,
  // k, alignments) asks cublasLtMatmulAlgoGetHeuristic for the bucket's row count and keeps the
  // answer; a call that the kept algorithm refuses asks again for its own rows. Returns
  // CUBLAS_STATUS_INVALID_VALUE for arguments outside the layout above, CUBLAS_STATUS_NOT_SUPPORTED
  // where cuBLASLt has no algorithm, else cuBLASLt's status (host-side: no device sync). Thread-safe.
  cublasStatus_t run(const Fp8GemmArgs& args, cudaStream_t stream);

  size_t cached_algorithms() const;

 private:
  // device, rows (a bucket, or exact rows when `exact`), n, k, alignments of x, w, y.
  using Key = std::tuple<int, int64_t, bool, int64_t, int64_t, uint32_t, uint32_t, uint32_t>;
  cublasStatus_t algorithm(const Fp8GemmArgs& args, const Key& key, int64_t rows, cublasLtMatmulAlgo_t* algo);

  cublasLtHandle_t handle_ = nullptr;
  cublasStatus_t created_ = CUBLAS_STATUS_NOT_INITIALIZED;
  mutable std::mutex mutex_;
  std::map<Key, cublasLtMatmulAlgo_t> algos_;
};

}  // namespace deepinfer::model::cuda
