#include "model/cuda/fp8_gemm.h"

namespace deepinfer::model::cuda {
namespace {

constexpr int64_t kScaleBlock = 128;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The largest power of two (at most 256, cuBLASLt's default assumption) dividing the address.
uint32_t alignment(const void* p) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 1;
  while (a < 256 && address % (2 * a) == 0) a *= 2;
  return a;
}

// One problem's descriptors: y [rows, n] = x [rows, k] w [n, k]^T, in cuBLAS's column-major
// terms D (n x rows) = A^T (A = w: k x n) B (B = x: k x rows).
class Problem final {
 public:
  Problem(const Fp8GemmArgs& args, int64_t rows) {
    const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
    const int32_t a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    const void* a_scale = args.w_scale;
    const void* b_scale = args.x_scale;
    const auto k = static_cast<uint64_t>(args.k), n = static_cast<uint64_t>(args.n), m = static_cast<uint64_t>(rows);
    step(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    step(set(CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof(transpose)));
    step(set(CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof(keep)));
    step(set(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode, sizeof(a_mode)));
    step(set(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode, sizeof(b_mode)));
    step(set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale, sizeof(a_scale)));
    step(set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale, sizeof(b_scale)));
    step(cublasLtMatrixLayoutCreate(&a_, CUDA_R_8F_E4M3, k, n, args.k));
    step(cublasLtMatrixLayoutCreate(&b_, CUDA_R_8F_E4M3, k, m, args.k));
    step(cublasLtMatrixLayoutCreate(&d_, CUDA_R_16BF, n, m, args.n));
  }
  ~Problem() {
    if (d_ != nullptr) cublasLtMatrixLayoutDestroy(d_);
    if (b_ != nullptr) cublasLtMatrixLayoutDestroy(b_);
    if (a_ != nullptr) cublasLtMatrixLayoutDestroy(a_);
    if (desc_ != nullptr) cublasLtMatmulDescDestroy(desc_);
  }
  Problem(const Problem&) = delete;
  Problem& operator=(const Problem&) = delete;

  cublasStatus_t status() const { return status_; }
  cublasLtMatmulDesc_t desc() const { return desc_; }
  cublasLtMatrixLayout_t a() const { return a_; }
  cublasLtMatrixLayout_t b() const { return b_; }
  cublasLtMatrixLayout_t d() const { return d_; }  // also C (beta 0)

 private:
  void step(cublasStatus_t s) {
    if (status_ == CUBLAS_STATUS_SUCCESS) status_ = s;
  }
  cublasStatus_t set(cublasLtMatmulDescAttributes_t attribute, const void* value, size_t bytes) {
    return status_ == CUBLAS_STATUS_SUCCESS ? cublasLtMatmulDescSetAttribute(desc_, attribute, value, bytes) : status_;
  }

  cublasStatus_t status_ = CUBLAS_STATUS_SUCCESS;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, d_ = nullptr;
};

// The heuristic's first answer for `problem` with the buffers' alignments and the workspace.
cublasStatus_t heuristic(cublasLtHandle_t handle, const Problem& problem, const Fp8GemmArgs& args, cublasLtMatmulAlgo_t* algo) {
  cublasLtMatmulPreference_t preference = nullptr;
  cublasStatus_t status = cublasLtMatmulPreferenceCreate(&preference);
  const uint64_t workspace = args.workspace_bytes;
  const uint32_t align_a = alignment(args.w), align_b = alignment(args.x), align_d = alignment(args.y);
  const auto set = [&](cublasLtMatmulPreferenceAttributes_t attribute, const void* value, size_t bytes) {
    if (status == CUBLAS_STATUS_SUCCESS) status = cublasLtMatmulPreferenceSetAttribute(preference, attribute, value, bytes);
  };
  set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace));
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a));
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b));
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d, sizeof(align_d));
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof(align_d));
  cublasLtMatmulHeuristicResult_t results[4] = {};
  int found = 0;
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = cublasLtMatmulAlgoGetHeuristic(handle, problem.desc(), problem.a(), problem.b(), problem.d(), problem.d(), preference, 4,
                                            results, &found);
  }
  if (preference != nullptr) cublasLtMatmulPreferenceDestroy(preference);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  for (int i = 0; i < found; ++i) {
    if (results[i].state == CUBLAS_STATUS_SUCCESS) {
      *algo = results[i].algo;
      return CUBLAS_STATUS_SUCCESS;
    }
  }
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

bool valid(const Fp8GemmArgs& a) {
  return fp8_gemm_shape_supported(a.n, a.k) && a.rows > 0 && a.rows % 4 == 0 && a.rows <= (int64_t{1} << 31) && a.x != nullptr &&
         a.x_scale != nullptr && a.w != nullptr && a.w_scale != nullptr && a.y != nullptr && reinterpret_cast<uintptr_t>(a.x) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(a.w) % 16 == 0 && reinterpret_cast<uintptr_t>(a.y) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(a.x_scale) % 16 == 0 && reinterpret_cast<uintptr_t>(a.w_scale) % 16 == 0 &&
         (a.workspace_bytes == 0 || reinterpret_cast<uintptr_t>(a.workspace) % 256 == 0);
}

}  // namespace

int64_t fp8_gemm_rows(int64_t m) { return (m + 3) / 4 * 4; }

int64_t fp8_gemm_scale_stride(int64_t k) { return (ceil_div(k, kScaleBlock) + 3) / 4 * 4; }

bool fp8_gemm_shape_supported(int64_t n, int64_t k) { return n > 0 && n % 8 == 0 && k > 0 && k % 16 == 0; }

int64_t fp8_gemm_bucket(int64_t rows) {
  if (rows > 256) return ceil_div(rows, 256) * 256;
  int64_t bucket = 4;
  while (bucket < rows) bucket *= 2;
  return bucket;
}

size_t fp8_gemm_cublaslt_version() { return cublasLtGetVersion(); }

const char* fp8_gemm_status_name(cublasStatus_t status) { return cublasLtGetStatusName(status); }

Fp8Gemm::Fp8Gemm() { created_ = cublasLtCreate(&handle_); }

Fp8Gemm::~Fp8Gemm() {
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

size_t Fp8Gemm::cached_algorithms() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return algos_.size();
}

cublasStatus_t Fp8Gemm::algorithm(const Fp8GemmArgs& args, const Key& key, int64_t rows, cublasLtMatmulAlgo_t* algo) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = algos_.find(key);
    if (it != algos_.end()) {
      *algo = it->second;
      return CUBLAS_STATUS_SUCCESS;
    }
  }
  const Problem problem(args, rows);  // the pointers are not read: only their alignment and presence count
  if (problem.status() != CUBLAS_STATUS_SUCCESS) return problem.status();
  const cublasStatus_t status = heuristic(handle_, problem, args, algo);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  const std::lock_guard<std::mutex> lock(mutex_);
  algos_.emplace(key, *algo);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t Fp8Gemm::run(const Fp8GemmArgs& args, cudaStream_t stream) {
  if (handle_ == nullptr || created_ != CUBLAS_STATUS_SUCCESS)
    return created_ == CUBLAS_STATUS_SUCCESS ? CUBLAS_STATUS_NOT_INITIALIZED : created_;
  if (!valid(args)) return CUBLAS_STATUS_INVALID_VALUE;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return CUBLAS_STATUS_NOT_INITIALIZED;
  const uint32_t ax = alignment(args.x), aw = alignment(args.w), ay = alignment(args.y);
  const int64_t bucket = fp8_gemm_bucket(args.rows);
  const Problem problem(args, args.rows);
  if (problem.status() != CUBLAS_STATUS_SUCCESS) return problem.status();
  const float alpha = 1.0f, beta = 0.0f;
  const auto multiply = [&](const cublasLtMatmulAlgo_t& algo) {
    return cublasLtMatmul(handle_, problem.desc(), &alpha, args.w, problem.a(), args.x, problem.b(), &beta, args.y, problem.d(), args.y,
                          problem.d(), &algo, args.workspace, args.workspace_bytes, stream);
  };
  cublasLtMatmulAlgo_t algo;
  cublasStatus_t status = algorithm(args, Key{device, bucket, false, args.n, args.k, ax, aw, ay}, bucket, &algo);
  if (status == CUBLAS_STATUS_SUCCESS) status = multiply(algo);
  const bool refused = status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_INVALID_VALUE;
  if (!refused || bucket == args.rows) return status;
  // The bucket's algorithm does not take these rows: the heuristic for exactly them.
  status = algorithm(args, Key{device, args.rows, true, args.n, args.k, ax, aw, ay}, args.rows, &algo);
  return status == CUBLAS_STATUS_SUCCESS ? multiply(algo) : status;
}

}  // namespace deepinfer::model::cuda
