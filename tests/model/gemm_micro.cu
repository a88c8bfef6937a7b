// Torch-free microbenchmark and check of the batch-invariant bfloat16 GEMM (model/cuda/dense_gemm.h)
// beside cuBLAS (what at::linear and at::bmm call), for iterating on the kernel on the GPU machine
// (tests/gpu/gemm_micro.sh builds it with nvcc alone in seconds). The V4 projections' shapes by
// default, at the given row counts; random bf16 x and W drawn on the device.
// Timing: `iters` calls rotating over copies of W (and x) that together exceed the L2 cache four
// times, captured in a CUDA graph and replayed between CUDA events (device time per call, launches
// included), a warm-up replay, the median of 5; the same for cublasGemmStridedBatchedEx (bf16 in
// and out, float32 compute, the default algorithm) in the same run. Bytes = W + x + y once.
// Checks, per shape (exit 1 when one fails): every row count's output equals the first rows of the
// largest count's output bit for bit (a row's bits do not depend on M, so not on the tile plan
// either); row r of the largest run alone (M = 1, x at row r) equals its row there; the result is
// within 2e-2 of cuBLAS's relative to max |cuBLAS| (both round to bfloat16 once).
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

__global__ void fill(__nv_bfloat16* p, int64_t n, uint64_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    uint64_t z = (seed + static_cast<uint64_t>(i)) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    p[i] = __float2bfloat16((static_cast<float>(z >> 40) / 16777216.0f * 2.0f - 1.0f) * scale);
  }
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

std::vector<uint16_t> download(const __nv_bfloat16* p, int64_t n) {
  std::vector<uint16_t> h(n);
  check(cudaMemcpy(h.data(), p, n * 2, cudaMemcpyDeviceToHost), "download");
  return h;
}

float to_float(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<int64_t> rows = parse_list(option(argc, argv, "rows", "1,64,145,256,4096,8192"));
  const int iters = std::atoi(option(argc, argv, "iters", "20").c_str());
  const std::string wanted = option(argc, argv, "shapes", "");
  const int64_t max_rows = *std::max_element(rows.begin(), rows.end());
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "sms");
  int major = 0, minor = 0;
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), "major");
  check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0), "minor");
  const bool hopper = major == 9 && minor == 0;
  int l2 = 0;
  check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0), "l2");
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "stream");
  cublasHandle_t blas;
  check(cublasCreate(&blas), "cublasCreate");
  check(cublasSetStream(blas, stream), "cublasSetStream");
  int failures = 0;
  std::printf("batch-invariant bf16 GEMM vs cuBLAS (bf16 in/out, fp32 compute, default algorithm); %d SMs; %d calls a graph, median of 5\n",
              sms, iters);
  std::printf("%-13s %6s %6s %2s %6s %2s %-16s %10s %10s %8s %8s %8s\n", "shape", "N", "K", "G", "M", "S", "plan", "ours us", "cuBLAS us",
              "ratio", "GB/s", "TFLOP/s");
  for (const Shape& s : kShapes) {
    if (!wanted.empty() && ("," + wanted + ",").find(std::string(",") + s.name + ",") == std::string::npos) continue;
    const int64_t w_elems = s.groups * s.n * s.k, x_elems = max_rows * s.groups * s.k, y_elems = max_rows * s.groups * s.n;
    const int64_t copies = std::clamp<int64_t>((4 * int64_t{l2}) / (2 * (w_elems + x_elems)) + 1, 1, 16);
    __nv_bfloat16 *w, *x, *y, *y_blas, *y_one;
    check(cudaMalloc(&w, copies * w_elems * 2), "malloc w");
    check(cudaMalloc(&x, copies * x_elems * 2), "malloc x");
    check(cudaMalloc(&y, y_elems * 2), "malloc y");
    check(cudaMalloc(&y_blas, y_elems * 2), "malloc y");
    check(cudaMalloc(&y_one, s.groups * s.n * 2), "malloc y");
    fill<<<1024, 256, 0, stream>>>(w, copies * w_elems, 1, 1.0f / std::sqrt(static_cast<float>(s.k)));
    fill<<<1024, 256, 0, stream>>>(x, copies * x_elems, 2, 1.0f);
    int64_t ws_bytes = 0;  // the most any row count needs (large ones may need none: their blocks add the ranges)
    for (int64_t m : rows) ws_bytes = std::max(ws_bytes, dc::dense_gemm_bf16_workspace_bytes(m, s.n, s.k, s.groups));
    float* workspace = nullptr;
    if (ws_bytes > 0) check(cudaMalloc(&workspace, ws_bytes), "malloc workspace");
    // x [M, G, K] (row stride G K, group stride K), W [G, N, K], y [M, G N] (group stride N).
    auto ours = [&](int64_t m, const __nv_bfloat16* xs, const __nv_bfloat16* ws, __nv_bfloat16* ys) {
      dc::DenseGemmBf16Args a;
      a.x = xs, a.w = ws, a.y = ys;
      a.ldx = s.groups * s.k, a.ldw = s.k, a.ldy = s.groups * s.n;
      a.m = m, a.n = s.n, a.k = s.k;
      a.groups = s.groups, a.gx = s.k, a.gw = s.n * s.k, a.gy = s.n;
      a.workspace = workspace;
      check(dc::dense_gemm_bf16(a, stream), "dense_gemm_bf16");
    };
    auto theirs = [&](int64_t m, const __nv_bfloat16* xs, const __nv_bfloat16* ws, __nv_bfloat16* ys) {
      // Column-major: y^T [N, M] (ld G N) = W [N, K]^T... as cuBLAS sees it: C = op(A) op(B) with
      // A = W (K x N, ld K, transposed), B = x^T (K x M, ld G K).
      const float one = 1.0f, zero = 0.0f;
      check(cublasGemmStridedBatchedEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(s.n), static_cast<int>(m), static_cast<int>(s.k),
                                       &one, ws, CUDA_R_16BF, static_cast<int>(s.k), s.n * s.k, xs, CUDA_R_16BF,
                                       static_cast<int>(s.groups * s.k), s.k, &zero, ys, CUDA_R_16BF, static_cast<int>(s.groups * s.n), s.n,
                                       static_cast<int>(s.groups), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "cublasGemmStridedBatchedEx");
    };
    // Checks on copy 0: the largest M, then every M's first rows, then single rows alone.
    ours(max_rows, x, w, y);
    theirs(max_rows, x, w, y_blas);
    check(cudaStreamSynchronize(stream), "sync");
    const std::vector<uint16_t> full = download(y, y_elems), blas_full = download(y_blas, y_elems);
    double max_ref = 0, max_diff = 0;
    for (int64_t i = 0; i < y_elems; ++i) {
      max_ref = std::max(max_ref, std::fabs(static_cast<double>(to_float(blas_full[i]))));
      max_diff = std::max(max_diff, std::fabs(static_cast<double>(to_float(full[i])) - to_float(blas_full[i])));
    }
    const bool close = max_diff <= 2e-2 * max_ref;
    int64_t unequal = 0;
    for (int64_t m : rows) {
      ours(m, x, w, y);
      check(cudaStreamSynchronize(stream), "sync");
      const std::vector<uint16_t> part = download(y, m * s.groups * s.n);
      for (int64_t i = 0; i < m * s.groups * s.n; ++i) unequal += part[i] != full[i];
    }
    for (int64_t r : {int64_t{0}, max_rows / 2, max_rows - 1}) {
      ours(1, x + r * s.groups * s.k, w, y_one);
      check(cudaStreamSynchronize(stream), "sync");
      const std::vector<uint16_t> one = download(y_one, s.groups * s.n);
      for (int64_t i = 0; i < s.groups * s.n; ++i) unequal += one[i] != full[r * s.groups * s.n + i];
    }
    const bool ok = close && unequal == 0;
    failures += !ok;
    std::printf("%-13s check: %s (vs cuBLAS max |diff| %.3g of max %.3g; %lld values differ from the largest run's rows)\n", s.name,
                ok ? "ok" : "FAILED", max_diff, max_ref, static_cast<long long>(unequal));
    for (int64_t m : rows) {
      const double t_ours = time_calls(stream, iters, [&](int i) {
        const int64_t c = i % copies;
        ours(m, x + c * x_elems, w + c * w_elems, y);
      });
      const double t_blas = time_calls(stream, iters, [&](int i) {
        const int64_t c = i % copies;
        theirs(m, x + c * x_elems, w + c * w_elems, y_blas);
      });
      const double bytes = 2.0 * (w_elems + m * s.groups * (s.k + s.n)), flops = 2.0 * m * s.groups * s.n * s.k;
      std::printf("%-13s %6lld %6lld %2lld %6lld %2d %-16s %10.1f %10.1f %8.2f %8.0f %8.1f\n", s.name, static_cast<long long>(s.n),
                  static_cast<long long>(s.k), static_cast<long long>(s.groups), static_cast<long long>(m),
                  dc::dense_gemm_bf16_splits(s.n, s.k, s.groups), dc::dense_gemm_bf16_plan(m, s.n, s.k, sms, hopper), t_ours, t_blas,
                  t_ours / t_blas, bytes / t_ours * 1e-3, flops / t_ours * 1e-6);
    }
    cudaFree(w), cudaFree(x), cudaFree(y), cudaFree(y_blas), cudaFree(y_one);
    if (workspace) cudaFree(workspace);
  }
  cublasDestroy(blas);
  std::printf("%s\n", failures == 0 ? "all checks ok" : "CHECKS FAILED");
  return failures == 0 ? 0 : 1;
}
