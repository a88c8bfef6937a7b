// Microbenchmark of the batch-invariant dense GEMMs (model/cuda/dense_gemm.h, through
// cuda::invariant_linear) beside at::linear (cuBLAS) in the same run, on V4-Flash's dense linears
// (D 4096) and row counts from decode to prefill. bfloat16 x and W, bfloat16 out (or float32 with
// --out f32), random inputs. CUDA events on the current stream around each call, the calls issued
// while the GPU is still busy with a queue of large matrix products so they run back to back (the
// host's time to issue one is printed beside: when it exceeds the device time, the device waited);
// a warm-up over every input set, then the median of the iterations. The input sets (W and x
// copies) rotate so that one set has left the 50 MB L2 cache when it comes round again.
// Bytes: W + x + y once each. FLOPs: 2 M N K. Also printed: the tile the kernels pick, their
// relative difference from cuBLAS and whether two calls give the same bits.
//   dense_gemm_bench [--rows 1,64,256,4096,8192] [--iters 50] [--shapes q_lora,wo_b,...] [--out bf16|f32]
//                    [--hbm-tbps 4.3] [--tflops 790]
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "engine/cuda/kernels.h"
#include "model/cuda/kernels.h"
#include "tests/model/bench_util.h"

namespace deepinfer::model::testing {
namespace {

using bench::option;
using bench::split;
using bench::Timing;

struct Shape {
  const char* name;
  int64_t n, k;
};
const std::vector<Shape> kShapes = {{"q_lora", 1024, 4096}, {"wq_b", 64 * 512, 1024},        {"wkv", 512, 4096},
                                    {"wo_b", 4096, 8192},   {"shared_w13", 2048, 4096},      {"shared_w2", 4096, 2048},
                                    {"head", 129280, 4096}, {"indexer_wq_b", 64 * 128, 1024}};

struct Set {
  at::Tensor x, w;
};

// bench::time_calls over the sets.
Timing time_path(const std::function<at::Tensor(const Set&)>& run, const std::vector<Set>& sets, int64_t iters, at::Device cuda) {
  return bench::time_calls([&](size_t c) { run(sets[c]); }, sets.size(), iters, cuda);
}

void report(const char* name, const Timing& t, double bytes, double flops, double tbps, double tflops) {
  const double gbps = bytes / t.median_ms / 1e6, achieved = flops / t.median_ms / 1e9;
  std::printf(
      "    %-10s median %9.1f us (min %9.1f; host %6.1f us to issue) -> %6.0f GB/s = %5.1f%% of %.1f TB/s; %6.1f TFLOP/s = %5.1f%% of "
      "%.0f\n",
      name, t.median_ms * 1e3, t.min_ms * 1e3, t.host_ms * 1e3, gbps, 100.0 * gbps / (tbps * 1e3), tbps, achieved,
      100.0 * achieved / tflops, tflops);
}

// Sets whose operands together exceed the L2 cache eight times over (at least 2, at most 16).
std::vector<Set> make_sets(const Shape& s, int64_t m, at::Device cuda) {
  const auto bf16 = at::TensorOptions().dtype(at::kBFloat16).device(cuda);
  const double set_bytes = 2.0 * static_cast<double>((s.n + m) * s.k);
  const int64_t count = std::clamp<int64_t>(static_cast<int64_t>(8.0 * (50 << 20) / set_bytes) + 1, 2, 16);
  std::vector<Set> sets;
  for (int64_t i = 0; i < count; ++i) sets.push_back({at::randn({m, s.k}, bf16), at::randn({s.n, s.k}, bf16) * (1.0 / 64)});
  return sets;
}

int run(int argc, char** argv) {
  if (!at::hasCUDA()) {
    std::printf("dense_gemm_bench: no CUDA device; nothing measured\n");
    return 0;
  }
  const at::Device cuda(at::kCUDA, 0);
  const int64_t iters = std::stoll(option(argc, argv, "iters", "50"));
  const double tbps = std::stod(option(argc, argv, "hbm-tbps", "4.3")), tflops = std::stod(option(argc, argv, "tflops", "790"));
  const at::ScalarType out = option(argc, argv, "out", "bf16") == "f32" ? at::kFloat : at::kBFloat16;
  std::vector<int64_t> rows;
  for (const std::string& item : split(option(argc, argv, "rows", "1,64,256,4096,8192"))) rows.push_back(std::stoll(item));
  const std::vector<std::string> wanted = split(option(argc, argv, "shapes", ""));
  bool all_repeatable = true;
  for (const Shape& s : kShapes) {
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), s.name) == wanted.end()) continue;
    for (const int64_t m : rows) {
      const std::vector<Set> sets = make_sets(s, m, cuda);
      const auto ours = [&](const Set& set) { return cuda::invariant_linear(set.x, set.w, out); };
      const auto cublas = [&](const Set& set) { return at::linear(set.x, set.w).to(out); };
      const at::Tensor first = ours(sets[0]), ref = cublas(sets[0]).to(at::kFloat);
      const bool repeatable = at::equal(first, ours(sets[0]));
      const double difference = ((first.to(at::kFloat) - ref).norm() / ref.norm()).item<double>();
      const double out_bytes = out == at::kFloat ? 4.0 : 2.0;
      const double bytes = 2.0 * static_cast<double>((s.n + m) * s.k) + out_bytes * static_cast<double>(m * s.n);
      const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(s.n) * static_cast<double>(s.k);
      std::printf("dense_gemm_bench: %s [%ld x %ld], M %ld, %s out (%zu input sets, %ld iterations): plan %s\n", s.name,
                  static_cast<long>(s.n), static_cast<long>(s.k), static_cast<long>(m), out == at::kFloat ? "float32" : "bfloat16",
                  sets.size(), static_cast<long>(iters), cuda::invariant_linear_plan(m, sets[0].w).c_str());
      const Timing a = time_path(ours, sets, iters, cuda), b = time_path(cublas, sets, iters, cuda);
      report("invariant", a, bytes, flops, tbps, tflops);
      report("at::linear", b, bytes, flops, tbps, tflops);
      std::printf("    invariant / at::linear %.2fx; |invariant - at::linear| / |at::linear| %.2e; invariant repeatable bit for bit: %s\n",
                  a.median_ms / b.median_ms, difference, repeatable ? "yes" : "NO");
      all_repeatable = all_repeatable && repeatable;
    }
  }
  return all_repeatable ? 0 : 1;
}

}  // namespace
}  // namespace deepinfer::model::testing

int main(int argc, char** argv) { return deepinfer::model::testing::run(argc, argv); }
