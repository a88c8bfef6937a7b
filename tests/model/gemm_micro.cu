// Torch-free microbenchmark and check of the batch-invariant GEMMs (model/cuda/dense_gemm.h)
// beside cuBLAS (what at::linear and at::bmm call), for iterating on the kernel on the GPU machine
// (tests/gpu/gemm_micro.sh builds it with nvcc alone in seconds). The V4 projections' shapes by
// default, at the given row counts, then the float32 GEMM's users (names f32_*); random x and W
// drawn on the device.
// Timing: `iters` calls rotating over copies of W (and x) that together exceed the L2 cache four
// times, captured in a CUDA graph and replayed between CUDA events (device time per call, launches
// included), a warm-up replay, the median of 5; the same for cublasGemmStridedBatchedEx (the shape's
// type in and out, float32 compute, the default algorithm and math mode) in the same run. Bytes = W + x + y once.
// Checks, per shape (exit 1 when one fails): every row count's output equals the first rows of the
// largest count's output bit for bit (a row's bits do not depend on M, so not on the tile plan
// either); row r of the largest run alone (M = 1, x at row r) equals its row there; the result is
// within 2e-2 (bfloat16: both round once) or 1e-4 (float32) of cuBLAS's relative to max |cuBLAS|.
// Each shape's check line ends with a hash of the largest run's bits, to compare builds.
//   gemm_micro [--rows 1,64,145,256,4096,8192] [--iters 20] [--shapes wkv,head,...]
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "model/cuda/dense_gemm.h"

namespace {

namespace dc = deepinfer::model::cuda;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(2);
  }
}
void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "%s: cuBLAS status %d\n", what, static_cast<int>(s));
    std::exit(2);
  }
}

struct Shape {
  const char* name;
  int64_t n, k, groups;
};

// The v4-flash-slice projections: attention (q_lora = wq_a, wq_b, wkv, the grouped wo_a, wo_b),
// the compressors' wkv / wgate (CSA 2 x 512, index 2 x 128, HCA 512), the indexer's wq_b, the
// shared expert, the head.
const Shape kShapes[] = {{"wq_a", 1024, 4096, 1},      {"wq_b", 32768, 1024, 1},        {"wkv", 512, 4096, 1},
                         {"wo_a", 1024, 4096, 8},      {"wo_b", 4096, 8192, 1},         {"cmp_csa", 1024, 4096, 1},
                         {"cmp_index", 256, 4096, 1},  {"indexer_wq_b", 8192, 1024, 1}, {"shared_w13", 2048, 4096, 1},
                         {"shared_w2", 4096, 2048, 1}, {"head", 129280, 4096, 1}};

// The float32 GEMM's users (dense_gemm_f32.cu): the mHC projection [24 x 4 D], the head's mHC
// projection [4 x 4 D], the router [256 x D] and an RMSNorm's sum of squares [1 x 4 D].
const Shape kF32Shapes[] = {
    {"f32_mhc", 24, 16384, 1}, {"f32_mhc_head", 4, 16384, 1}, {"f32_router", 256, 4096, 1}, {"f32_sumsq", 1, 16384, 1}};

// Uniform in [-scale, scale): splitmix64 of seed + i.
__device__ float random_value(uint64_t seed, int64_t i, float scale) {
  uint64_t z = (seed + static_cast<uint64_t>(i)) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (static_cast<float>(z >> 40) / 16777216.0f * 2.0f - 1.0f) * scale;
}

template <class T>
__global__ void fill(T* p, int64_t n, uint64_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    p[i] = static_cast<T>(random_value(seed, i, scale));
}

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> v;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) v.push_back(std::stoll(item));
  return v;
}

std::string option(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == std::string("--") + name) return argv[i + 1];
  return fallback;
}

// Device time per call of `call(i)` over `iters` calls in a graph: a warm-up replay, median of 5.
template <class Call>
double time_calls(cudaStream_t stream, int iters, Call call) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "capture");
  for (int i = 0; i < iters; ++i) call(i);
  check(cudaStreamEndCapture(stream, &graph), "end capture");
  check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  check(cudaGraphLaunch(exec, stream), "warm-up");
  std::vector<float> ms;
  for (int r = 0; r < 5; ++r) {
    check(cudaEventRecord(a, stream), "record");
    check(cudaGraphLaunch(exec, stream), "replay");
    check(cudaEventRecord(b, stream), "record");
    check(cudaEventSynchronize(b), "sync");
    float t = 0;
    check(cudaEventElapsedTime(&t, a, b), "elapsed");
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms[2] * 1e3 / iters;  // us per call
}

float float_of(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// The element types: bfloat16 (dense_gemm_bf16, groups, the workspace its plan needs) and float32
// (dense_gemm_f32, one group). Bits: the element's raw bits, compared exactly.
template <class T>
struct Kind;

template <>
struct Kind<__nv_bfloat16> {
  using Bits = uint16_t;
  static constexpr cudaDataType kCublasType = CUDA_R_16BF;
  static constexpr double kTolerance = 2e-2;  // both round to bfloat16 once
  static double value(Bits b) { return float_of(static_cast<uint32_t>(b) << 16); }
  static int64_t workspace_bytes(const Shape& s, int64_t m) { return dc::dense_gemm_bf16_workspace_bytes(m, s.n, s.k, s.groups); }
  static int ranges(const Shape& s) { return dc::dense_gemm_bf16_splits(s.n, s.k, s.groups); }
  static const char* plan(const Shape& s, int64_t m, int sms, bool hopper) { return dc::dense_gemm_bf16_plan(m, s.n, s.k, sms, hopper); }
  // x [M, G, K] (row stride G K, group stride K), W [G, N, K], y [M, G N] (group stride N).
  static cudaError_t run(const Shape& s, int64_t m, const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, float* workspace,
                         cudaStream_t stream) {
    dc::DenseGemmBf16Args a;
    a.x = x, a.w = w, a.y = y;
    a.ldx = s.groups * s.k, a.ldw = s.k, a.ldy = s.groups * s.n;
    a.m = m, a.n = s.n, a.k = s.k;
    a.groups = s.groups, a.gx = s.k, a.gw = s.n * s.k, a.gy = s.n;
    a.workspace = workspace;
    return dc::dense_gemm_bf16(a, stream);
  }
};

template <>
struct Kind<float> {
  using Bits = uint32_t;
  static constexpr cudaDataType kCublasType = CUDA_R_32F;
  static constexpr double kTolerance = 1e-4;  // float32 sums in another order
  static double value(Bits b) { return float_of(b); }
  static int64_t workspace_bytes(const Shape& s, int64_t m) { return dc::dense_gemm_f32_workspace_bytes(m, s.n, s.k); }
  static int ranges(const Shape& s) { return dc::dense_gemm_f32_ranges(s.k); }
  static const char* plan(const Shape& s, int64_t m, int sms, bool) { return dc::dense_gemm_f32_plan(m, s.n, s.k, sms); }
  static cudaError_t run(const Shape& s, int64_t m, const float* x, const float* w, float* y, float* workspace, cudaStream_t stream) {
    dc::DenseGemmF32Args a;
    a.x = x, a.w = w, a.y = y;
    a.ldx = s.k, a.ldw = s.k, a.ldy = s.n;
    a.m = m, a.n = s.n, a.k = s.k;
    a.workspace = workspace;
    return dc::dense_gemm_f32(a, stream);
  }
};

template <class Bits>
std::vector<Bits> download(const void* p, int64_t n) {
  std::vector<Bits> h(n);
  check(cudaMemcpy(h.data(), p, n * sizeof(Bits), cudaMemcpyDeviceToHost), "download");
  return h;
}

struct Device {
  int sms = 0, l2 = 0;
  bool hopper = false;
  cudaStream_t stream;
  cublasHandle_t blas;
};

// One shape: checks on copy 0 (the largest M, then every M's first rows, then single rows alone),
// then every M timed beside cuBLAS (cublasGemmStridedBatchedEx, the type in and out, float32
// compute, the default algorithm and math mode: no TF32). Returns whether the checks passed.
template <class T>
bool run_shape(const Shape& s, const std::vector<int64_t>& rows, int iters, const Device& d) {
  using K = Kind<T>;
  const int64_t max_rows = *std::max_element(rows.begin(), rows.end());
  const int64_t w_elems = s.groups * s.n * s.k, x_elems = max_rows * s.groups * s.k, y_elems = max_rows * s.groups * s.n;
  const int64_t copies = std::clamp<int64_t>((4 * int64_t{d.l2}) / (int64_t{sizeof(T)} * (w_elems + x_elems)) + 1, 1, 16);
  T *w, *x, *y, *y_blas, *y_one;
  check(cudaMalloc(&w, copies * w_elems * sizeof(T)), "malloc w");
  check(cudaMalloc(&x, copies * x_elems * sizeof(T)), "malloc x");
  check(cudaMalloc(&y, y_elems * sizeof(T)), "malloc y");
  check(cudaMalloc(&y_blas, y_elems * sizeof(T)), "malloc y");
  check(cudaMalloc(&y_one, s.groups * s.n * sizeof(T)), "malloc y");
  fill<<<1024, 256, 0, d.stream>>>(w, copies * w_elems, 1, 1.0f / std::sqrt(static_cast<float>(s.k)));
  fill<<<1024, 256, 0, d.stream>>>(x, copies * x_elems, 2, 1.0f);
  int64_t ws_bytes = 0;  // the most any row count needs (large bf16 ones may need none: their blocks add the ranges)
  for (int64_t m : rows) ws_bytes = std::max(ws_bytes, K::workspace_bytes(s, m));
  float* workspace = nullptr;
  if (ws_bytes > 0) check(cudaMalloc(&workspace, ws_bytes), "malloc workspace");
  auto ours = [&](int64_t m, const T* xs, const T* ws, T* ys) { check(K::run(s, m, xs, ws, ys, workspace, d.stream), "ours"); };
  auto theirs = [&](int64_t m, const T* xs, const T* ws, T* ys) {
    // Column-major: C = op(A) op(B) with A = W (K x N, ld K, transposed), B = x^T (K x M, ld G K).
    const float one = 1.0f, zero = 0.0f;
    check(cublasGemmStridedBatchedEx(d.blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(s.n), static_cast<int>(m), static_cast<int>(s.k),
                                     &one, ws, K::kCublasType, static_cast<int>(s.k), s.n * s.k, xs, K::kCublasType,
                                     static_cast<int>(s.groups * s.k), s.k, &zero, ys, K::kCublasType, static_cast<int>(s.groups * s.n),
                                     s.n, static_cast<int>(s.groups), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmStridedBatchedEx");
  };
  using Bits = typename K::Bits;
  ours(max_rows, x, w, y);
  theirs(max_rows, x, w, y_blas);
  check(cudaStreamSynchronize(d.stream), "sync");
  const std::vector<Bits> full = download<Bits>(y, y_elems), blas_full = download<Bits>(y_blas, y_elems);
  double max_ref = 0, max_diff = 0;
  for (int64_t i = 0; i < y_elems; ++i) {
    max_ref = std::max(max_ref, std::fabs(K::value(blas_full[i])));
    max_diff = std::max(max_diff, std::fabs(K::value(full[i]) - K::value(blas_full[i])));
  }
  const bool close = max_diff <= K::kTolerance * max_ref;
  int64_t unequal = 0;
  for (int64_t m : rows) {
    ours(m, x, w, y);
    check(cudaStreamSynchronize(d.stream), "sync");
    const std::vector<Bits> part = download<Bits>(y, m * s.groups * s.n);
    for (int64_t i = 0; i < m * s.groups * s.n; ++i) unequal += part[i] != full[i];
  }
  for (int64_t r : {int64_t{0}, max_rows / 2, max_rows - 1}) {
    ours(1, x + r * s.groups * s.k, w, y_one);
    check(cudaStreamSynchronize(d.stream), "sync");
    const std::vector<Bits> one = download<Bits>(y_one, s.groups * s.n);
    for (int64_t i = 0; i < s.groups * s.n; ++i) unequal += one[i] != full[r * s.groups * s.n + i];
  }
  const bool ok = close && unequal == 0;
  uint64_t hash = 1469598103934665603ull;  // FNV-1a of the largest run's bits: equal across builds that keep the arithmetic
  for (const Bits v : full) hash = (hash ^ v) * 1099511628211ull;
  std::printf("%-13s check: %s (vs cuBLAS max |diff| %.3g of max %.3g; %lld values differ from the largest run's rows; bits %016llx)\n",
              s.name, ok ? "ok" : "FAILED", max_diff, max_ref, static_cast<long long>(unequal), static_cast<unsigned long long>(hash));
  for (int64_t m : rows) {
    const double t_ours = time_calls(d.stream, iters, [&](int i) { ours(m, x + i % copies * x_elems, w + i % copies * w_elems, y); });
    const double t_blas =
        time_calls(d.stream, iters, [&](int i) { theirs(m, x + i % copies * x_elems, w + i % copies * w_elems, y_blas); });
    const double bytes = static_cast<double>(sizeof(T)) * (w_elems + m * s.groups * (s.k + s.n)), flops = 2.0 * m * s.groups * s.n * s.k;
    std::printf("%-13s %6lld %6lld %2lld %6lld %2d %-16s %10.1f %10.1f %8.2f %8.0f %8.1f\n", s.name, static_cast<long long>(s.n),
                static_cast<long long>(s.k), static_cast<long long>(s.groups), static_cast<long long>(m), K::ranges(s),
                K::plan(s, m, d.sms, d.hopper), t_ours, t_blas, t_ours / t_blas, bytes / t_ours * 1e-3, flops / t_ours * 1e-6);
  }
  cudaFree(w), cudaFree(x), cudaFree(y), cudaFree(y_blas), cudaFree(y_one);
  if (workspace) cudaFree(workspace);
  return ok;
}

bool wanted(const std::string& list, const char* name) {
  return list.empty() || ("," + list + ",").find(std::string(",") + name + ",") != std::string::npos;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<int64_t> rows = parse_list(option(argc, argv, "rows", "1,64,145,256,4096,8192"));
  const int iters = std::atoi(option(argc, argv, "iters", "20").c_str());
  const std::string shapes = option(argc, argv, "shapes", "");
  Device d;
  check(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, 0), "sms");
  int major = 0, minor = 0;
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), "major");
  check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0), "minor");
  d.hopper = major == 9 && minor == 0;
  check(cudaDeviceGetAttribute(&d.l2, cudaDevAttrL2CacheSize, 0), "l2");
  check(cudaStreamCreate(&d.stream), "stream");
  check(cublasCreate(&d.blas), "cublasCreate");
  check(cublasSetStream(d.blas, d.stream), "cublasSetStream");
  int failures = 0;
  std::printf(
      "batch-invariant GEMMs vs cuBLAS (the type in and out, fp32 compute, default algorithm); %d SMs; %d calls a graph, median of 5\n",
      d.sms, iters);
  std::printf("%-13s %6s %6s %2s %6s %2s %-16s %10s %10s %8s %8s %8s\n", "shape", "N", "K", "G", "M", "S", "plan", "ours us", "cuBLAS us",
              "ratio", "GB/s", "TFLOP/s");
  for (const Shape& s : kShapes)
    if (wanted(shapes, s.name)) failures += !run_shape<__nv_bfloat16>(s, rows, iters, d);
  for (const Shape& s : kF32Shapes)
    if (wanted(shapes, s.name)) failures += !run_shape<float>(s, rows, iters, d);
  cublasDestroy(d.blas);
  std::printf("%s\n", failures == 0 ? "all checks ok" : "CHECKS FAILED");
  return failures == 0 ? 0 : 1;
}
