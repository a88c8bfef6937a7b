// Microbenchmark of the FP8 linears: cuda::fp8_linear (act_quant + cuBLASLt's block-scaled FP8
// GEMM, model/cuda/fp8_gemm.h) beside bfloat16 at::linear on the dequantized weight (what the
// forward runs today), per V4 linear shape and row count; cuda::act_quant alone beside them (the
// GEMM is about the difference). CUDA events on the current stream around each call, the calls
// issued while the GPU is still busy so they run back to back (the host's time to issue one is
// printed beside: when it exceeds the device time, the device waited for the host); a warm-up
// over every weight copy, the median of the iterations; the weight copies rotate so that one has
// left the L2 cache when it comes round again.
// Bytes: the weight as each path reads it (FP8: N K codes + 4 ceil(N/128) ceil(K/128) scale bytes;
// bfloat16: 2 N K), against --hbm-tbps. FLOPs: 2 M N K, against --tflops (the bf16 dense peak; the
// FP8 path is also printed against --fp8-tflops, H200's FP8 dense peak).
//   fp8_linear_bench [--rows 1,64,256,4096] [--iters 30] [--hbm-tbps 4.3] [--tflops 790] [--fp8-tflops 1580]
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "engine/cuda/kernels.h"
#include "model/cuda/kernels.h"
#include "model/quant.h"
#include "tests/model/bench_util.h"

namespace deepinfer::model::testing {
namespace {

using bench::option;
using bench::time_calls;
using bench::Timing;

struct Peaks {
  double tbps, tflops, fp8_tflops;
};

void report(const char* name, const Timing& t, double bytes, double flops, const Peaks& peaks, bool fp8) {
  const double gbps = bytes / t.median_ms / 1e6, achieved = flops / t.median_ms / 1e9;
  std::printf(
      "  %-22s median %9.1f us (min %9.1f; host %6.1f us to issue) -> weight %6.0f GB/s = %5.1f%% of %.2f TB/s; %7.1f TFLOP/s = %5.1f%% of "
      "%.0f",
      name, t.median_ms * 1e3, t.min_ms * 1e3, t.host_ms * 1e3, gbps, 100.0 * gbps / (peaks.tbps * 1e3), peaks.tbps, achieved,
      100.0 * achieved / peaks.tflops, peaks.tflops);
  if (fp8) std::printf(" (%5.1f%% of the FP8 %.0f)", 100.0 * achieved / peaks.fp8_tflops, peaks.fp8_tflops);
  std::printf("\n");
}

struct Shape {
  const char* name;
  int64_t n, k;
};

// Weight copies: random finite e4m3 codes and e8m0 scales around 2^-6, the float32 scales the FP8
// path reads and the bfloat16 dequantization the at::linear path reads.
struct Copies {
  std::vector<at::Tensor> codes, scales, dequantized;
};

Copies make_copies(const Shape& s, size_t count, at::Generator& gen, at::Device cuda) {
  const at::TensorOptions bytes = at::TensorOptions().dtype(at::kByte).device(cuda);
  Copies c;
  for (size_t i = 0; i < count; ++i) {
    // Codes 0x00..0x7D and 0x80..0xFD: no NaN (0x7F, 0xFF).
    const at::Tensor codes = (at::randint(0, 126, {s.n, s.k}, gen, bytes) + at::randint(0, 2, {s.n, s.k}, gen, bytes) * 0x80).to(at::kByte);
    const at::Tensor e8m0 = at::randint(119, 123, {(s.n + 127) / 128, (s.k + 127) / 128}, gen, bytes);
    c.codes.push_back(codes);
    c.scales.push_back(e8m0_table(cuda).index_select(0, e8m0.reshape({-1}).to(at::kLong)).view(e8m0.sizes()));
    c.dequantized.push_back(dequant_fp8_blockwise(codes, e8m0, at::kBFloat16));
  }
  return c;
}

bool bench_shape(const Shape& s, const std::vector<int64_t>& row_counts, int64_t iters, const Peaks& peaks, at::Device cuda) {
  const double fp8_bytes = static_cast<double>(s.n) * s.k + 4.0 * ((s.n + 127) / 128) * ((s.k + 127) / 128);
  const double bf16_bytes = 2.0 * s.n * s.k;
  // Copies until the FP8 ones exceed 400 MB (8 L2 caches), at least 2, at most 64.
  const size_t copies = static_cast<size_t>(std::clamp<double>(std::ceil(400e6 / fp8_bytes), 2, 64));
  at::Generator gen = cuda::make_generator(/*seed=*/s.n * 7 + s.k, cuda);
  const Copies w = make_copies(s, copies, gen, cuda);
  bool ok = true;
  for (const int64_t m : row_counts) {
    const at::Tensor x = at::randn({m, s.k}, gen, at::TensorOptions().dtype(at::kFloat).device(cuda)).to(at::kBFloat16);
    if (!cuda::fp8_linear_supported(x, w.codes[0], w.scales[0])) {
      std::printf(
          "fp8_linear_bench: %s [%ld x %ld], M %ld: fp8_linear_supported is false (needs compute capability 9.0, cuBLASLt >= 12.9)\n",
          s.name, long(s.n), long(s.k), long(m));
      return false;
    }
    const double flops = 2.0 * m * s.n * s.k;
    std::printf("fp8_linear_bench: %s, M %ld x N %ld x K %ld: %.2f MB of FP8 weight (%.2f MB bf16), %zu copies rotating; %ld iterations\n",
                s.name, long(m), long(s.n), long(s.k), fp8_bytes / 1e6, bf16_bytes / 1e6, copies, long(iters));
    const auto fp8 = [&](size_t c) { (void)cuda::fp8_linear(x, w.codes[c], w.scales[c]); };
    const auto bf16 = [&](size_t c) { (void)at::linear(x, w.dequantized[c]); };
    const auto quant = [&](size_t) { (void)cuda::act_quant(x); };
    report("fp8_linear", time_calls(fp8, copies, iters, cuda), fp8_bytes, flops, peaks, /*fp8=*/true);
    report("at::linear (bf16)", time_calls(bf16, copies, iters, cuda), bf16_bytes, flops, peaks, /*fp8=*/false);
    const Timing q = time_calls(quant, 1, iters, cuda);
    std::printf("  %-22s median %9.1f us (min %9.1f; host %6.1f us to issue): reads %.2f MB, writes %.2f MB\n", "act_quant alone",
                q.median_ms * 1e3, q.min_ms * 1e3, q.host_ms * 1e3, 2.0 * m * s.k / 1e6, (m * s.k + 4.0 * m * ((s.k + 127) / 128)) / 1e6);
    const at::Tensor a = cuda::fp8_linear(x, w.codes[0], w.scales[0]), b = at::linear(x, w.dequantized[0]);
    const bool repeatable = at::equal(a, cuda::fp8_linear(x, w.codes[0], w.scales[0]));
    const double difference = ((a.to(at::kFloat) - b.to(at::kFloat)).norm() / b.to(at::kFloat).norm()).item<double>();
    // The FP8 path quantizes x to e4m3 (3 mantissa bits): a few percent from the bf16 path is expected.
    std::printf("  |fp8 - bf16| / |bf16| %.2e (x in e4m3 vs bfloat16); fp8_linear repeatable bit for bit: %s\n", difference,
                repeatable ? "yes" : "NO");
    ok = ok && repeatable && difference < 0.1;
  }
  return ok;
}

int run(int argc, char** argv) {
  if (!at::hasCUDA()) {
    std::printf("fp8_linear_bench: no CUDA device; nothing measured\n");
    return 0;
  }
  const at::Device cuda(at::kCUDA, 0);
  const int64_t iters = std::stoll(option(argc, argv, "iters", "30"));
  const Peaks peaks{std::stod(option(argc, argv, "hbm-tbps", "4.3")), std::stod(option(argc, argv, "tflops", "790")),
                    std::stod(option(argc, argv, "fp8-tflops", "1580"))};
  const std::vector<int64_t> row_counts = bench::int_list(option(argc, argv, "rows", "1,64,256,4096"));
  const std::vector<Shape> shapes = {
      {"attn.wq_a (q_lora)", 1024, 4096},     {"attn.wq_b", 32768, 1024},       {"attn.wkv", 512, 4096}, {"attn.wo_b", 4096, 8192},
      {"shared_experts.w1 / w3", 2048, 4096}, {"shared_experts.w2", 4096, 2048}};
  bool ok = true;
  for (const Shape& s : shapes) ok = bench_shape(s, row_counts, iters, peaks, cuda) && ok;
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace deepinfer::model::testing

int main(int argc, char** argv) { return deepinfer::model::testing::run(argc, argv); }
