// Microbenchmark of one layer's routed experts at v4-flash-slice's dimensions: the FP4 kernels
// (ExpertWorkspace::routed_partial, model/cuda/moe_fp4_gemm.h) beside the dequantize-then-
// at::_grouped_mm path (routed_partial_dequantized), each call whole (the sort by expert
// included), on random packed FP4 experts and random top-k routings. CUDA events on the current
// stream around each call, the calls issued while the GPU is still busy so they run back to
// back (the host's time to issue one is printed beside: when it exceeds the device time, the
// device waited for the host); a warm-up over every input set, the median of the iterations; the
// input sets rotate so the experts one set touches have left the 50 MB L2 cache when it comes
// round again.
// Bytes: the FP4 weights and scales of the distinct experts a set hits (each read once).
// FLOPs: 2 x 3 x I x D per (token, slot) pair. Peak: the caching allocator's peak during the
// warm-up (one call per set) above what was allocated before it.
//   moe_bench [--tokens 1,64,256,4096] [--iters 30] [--experts 256] [--k 6] [--hidden 4096]
//             [--intermediate 2048] [--hbm-tbps 4.3] [--tflops 790]
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "engine/cuda/kernels.h"
#include "model/moe_grouped.h"
#include "model/torch_compat.h"
#include "tests/engine/bench_device.h"
#include "tests/model/bench_util.h"
#include "tests/model/fp4_experts_fixture.h"

namespace deepinfer::model::testing {
namespace {

using bench::option;

struct Timing : bench::Timing {
  int64_t peak_bytes = 0;  // above what was allocated before, over one call per set
};

// The allocator's peak over one call per set, then bench::time_calls over the sets.
Timing time_path(const std::function<at::Tensor(const Routing&)>& run, const std::vector<Routing>& sets, int64_t iters, at::Device cuda) {
  Timing t;
  // A first call per set measures the peak.
  engine::cuda::reset_peak_memory(cuda);
  const int64_t before = engine::cuda::device_memory(cuda).peak_allocated;
  for (const Routing& set : sets) run(set);
  t.peak_bytes = engine::cuda::device_memory(cuda).peak_allocated - before;
  static_cast<bench::Timing&>(t) = bench::time_calls([&](size_t c) { run(sets[c]); }, sets.size(), iters, cuda);
  return t;
}

std::string mib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), bytes >= (int64_t{1} << 30) ? "%.2f GiB" : "%.1f MiB",
                static_cast<double>(bytes) / (bytes >= (int64_t{1} << 30) ? double(int64_t{1} << 30) : double(int64_t{1} << 20)));
  return text;
}

void report(const char* name, const Timing& t, double bytes, double flops, double tbps, double tflops) {
  const double gbps = bytes / t.median_ms / 1e6, achieved = flops / t.median_ms / 1e9;
  std::printf(
      "  %-26s median %9.1f us (min %9.1f; host %7.1f us to issue) -> %6.0f GB/s = %5.1f%% of %.2f TB/s; %6.1f TFLOP/s = %5.1f%% of "
      "%.0f; peak +%s\n",
      name, t.median_ms * 1e3, t.min_ms * 1e3, t.host_ms * 1e3, gbps, 100.0 * gbps / (tbps * 1e3), tbps, achieved,
      100.0 * achieved / tflops, tflops, mib(t.peak_bytes).c_str());
}

int run(int argc, char** argv) {
  if (!at::hasCUDA()) {
    std::printf("moe_bench: no CUDA device; nothing measured\n");
    return 0;
  }
  const at::Device cuda(at::kCUDA, 0);
  const int64_t iters = std::stoll(option(argc, argv, "iters", "30")), experts = std::stoll(option(argc, argv, "experts", "256"));
  const int64_t k = std::stoll(option(argc, argv, "k", "6")), D = std::stoll(option(argc, argv, "hidden", "4096"));
  const int64_t I = std::stoll(option(argc, argv, "intermediate", "2048"));
  const double tbps = std::stod(option(argc, argv, "hbm-tbps", "4.3")), tflops = std::stod(option(argc, argv, "tflops", "790"));
  std::vector<int64_t> token_counts;
  std::stringstream list(option(argc, argv, "tokens", "1,64,256,4096"));
  for (std::string item; std::getline(list, item, ',');) token_counts.push_back(std::stoll(item));

  const ModelConfig config = expert_config(D, I, experts, k);
  const ModelWeights weights = random_fp4_experts(config, {0, experts}, /*seed=*/1, cuda);
  const double expert_bytes = 3.0 * I * D / 2 + 3.0 * I * D / 32;  // w1, w3, w2 packed + scales
  ExpertWorkspace workspace;
  at::Generator gen = cuda::make_generator(/*seed=*/2, cuda);
  bool all_close = true;
  for (const int64_t tokens : token_counts) {
    // Sets until the experts they touch together exceed the L2 cache eight times over (at least 2, at most 16).
    std::vector<Routing> sets;
    double touched = 0;
    while (sets.size() < 2 || (touched < 8.0 * (50 << 20) && sets.size() < 16)) {
      sets.push_back(random_routing(tokens, D, experts, k, /*hot=*/0, gen, cuda));
      touched += std::get<0>(at::_unique(sets.back().experts.flatten())).numel() * expert_bytes;
    }
    const double bytes = touched / static_cast<double>(sets.size()), flops = 2.0 * tokens * k * 3.0 * I * D;
    const auto fp4 = [&](const Routing& r) { return workspace.routed_partial(weights, 0, r.x, r.experts, r.weights); };
    const auto dequantized = [&](const Routing& r) { return workspace.routed_partial_dequantized(weights, 0, r.x, r.experts, r.weights); };
    const at::Tensor first = fp4(sets[0]);
    const bool repeatable = at::equal(first, fp4(sets[0]));
    std::printf(
        "moe_bench: %s, routed experts, D %ld, I %ld, %ld experts, k %ld, %ld tokens (%ld pairs): %.1f experts hit on average over %zu "
        "input sets, %.3f GB of FP4 weights and scales touched per call; %ld iterations after a warm-up\n",
        ::deepinfer::bench::describe_device(cuda).c_str(), long(D), long(I), long(experts), long(k), long(tokens), long(tokens * k),
        bytes / expert_bytes, sets.size(), bytes / 1e9, long(iters));
    report("fp4 kernels", time_path(fp4, sets, iters, cuda), bytes, flops, tbps, tflops);
    if (compat::kHasGroupedMm) {
      report("dequant + at::_grouped_mm", time_path(dequantized, sets, iters, cuda), bytes, flops, tbps, tflops);
      const at::Tensor ref = dequantized(sets[0]);
      const double error = ((first - ref).norm() / ref.norm()).item<double>();
      all_close = all_close && error <= 1e-2;
      std::printf("  |fp4 - dequant| / |dequant| %.2e; fp4 repeatable bit for bit: %s\n", error, repeatable ? "yes" : "NO");
    } else {
      std::printf("  (no at::_grouped_mm in this LibTorch: the dequantizing path is not timed); fp4 repeatable bit for bit: %s\n",
                  repeatable ? "yes" : "NO");
    }
    all_close = all_close && repeatable;
  }
  return all_close ? 0 : 1;
}

}  // namespace
}  // namespace deepinfer::model::testing

int main(int argc, char** argv) { return deepinfer::model::testing::run(argc, argv); }
