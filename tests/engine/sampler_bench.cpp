// sampler_bench: the time of one sample() call on a [batch, vocab] logits tensor.
//
//   sampler_bench [--device cuda|cpu] [--batch 64] [--vocab 129280] [--dtype float|bf16]
//                 [--iters N] [--warmup W]
//
// Prints the hardware, LibTorch version and, per configuration, the median / min / max of N
// timed calls after W untimed warm-up calls (CUDA events on the GPU, a steady clock on the CPU).
// The parameter tensors are on the device before timing starts, as in the model runner.

#include <ATen/ATen.h>
#include <torch/version.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "engine/sampler_ops.h"
#include "engine/sampling_batch.h"
#include "tests/engine/bench_device.h"

namespace deepinfer::bench {
namespace {

using engine::SamplingBatch;
using engine::SamplingRow;

struct Args {
  std::string device = at::hasCUDA() ? "cuda" : "cpu";
  int64_t batch = 64;
  int64_t vocab = 129280;
  std::string dtype = "float";
  int iters = -1;   // default: 50 on CUDA, 5 on CPU
  int warmup = -1;  // default: 5 on CUDA, 1 on CPU
};

Args parse(int argc, char** argv) {
  Args a;
  for (const auto& [key, value] : option_pairs(argc, argv)) {
    if (key == "--device")
      a.device = value;
    else if (key == "--batch")
      a.batch = std::stoll(value);
    else if (key == "--vocab")
      a.vocab = std::stoll(value);
    else if (key == "--dtype")
      a.dtype = value;
    else if (key == "--iters")
      a.iters = std::stoi(value);
    else if (key == "--warmup")
      a.warmup = std::stoi(value);
    else
      TORCH_CHECK(false, "unknown option ", key, " (see the comment at the top of sampler_bench.cpp)");
  }
  TORCH_CHECK(a.device == "cuda" || a.device == "cpu", "--device must be cuda or cpu, got ", a.device);
  TORCH_CHECK(a.dtype == "float" || a.dtype == "bf16", "--dtype must be float or bf16, got ", a.dtype);
  TORCH_CHECK(a.batch > 0 && a.vocab > 0, "--batch and --vocab must be > 0");
  const bool cuda = a.device == "cuda";
  if (a.iters < 0) a.iters = cuda ? 50 : 5;
  if (a.warmup < 0) a.warmup = cuda ? 5 : 1;
  TORCH_CHECK(a.iters > 0 && a.warmup >= 0, "--iters must be > 0 and --warmup >= 0");
  return a;
}

std::vector<SamplingRow> rows_with(int64_t batch, const std::function<void(SamplingRow&, int64_t)>& set) {
  std::vector<SamplingRow> rows(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) {
    rows[i].seed = 1000003ULL * static_cast<uint64_t>(i);
    rows[i].position = 100 + i;
    set(rows[i], i);
  }
  return rows;
}

void report(const char* name, std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  std::printf("%-46s median %9.3f ms   min %9.3f   max %9.3f   (n=%zu)\n", name, ms[ms.size() / 2], ms.front(), ms.back(), ms.size());
}

std::vector<double> time_calls(const Args& a, at::Device device, const std::function<void()>& call) {
  return bench::time_calls(device, a.warmup, a.iters, call);
}

int run(const Args& a) {
  const at::Device device = a.device == "cuda" ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
  std::printf("sampler_bench: %s | LibTorch %s | logits [%lld, %lld] %s | warm-up %d, timed %d\n", describe_device(device).c_str(),
              TORCH_VERSION, static_cast<long long>(a.batch), static_cast<long long>(a.vocab), a.dtype.c_str(), a.warmup, a.iters);
  const at::Tensor logits = at::randn({a.batch, a.vocab}, at::kFloat).mul_(3.0f).to(device, a.dtype == "bf16" ? at::kBFloat16 : at::kFloat);
  struct Config {
    const char* name;
    std::function<void(SamplingRow&, int64_t)> set;
  };
  const std::vector<Config> configs = {
      {"greedy (T=0)", [](SamplingRow& r, int64_t) { r.temperature = 0.0f; }},
      {"gumbel (T=0.8, no filters)", [](SamplingRow& r, int64_t) { r.temperature = 0.8f; }},
      {"top_k=50 (topk path)", [](SamplingRow& r, int64_t) { r.top_k = 50; }},
      {"top_k=50 top_p=0.9 min_p=0.05 (sort path)",
       [](SamplingRow& r, int64_t) {
         r.top_k = 50;
         r.top_p = 0.9f;
         r.min_p = 0.05f;
       }},
      {"mixed rows + bias + min_tokens + logprobs=20",
       [](SamplingRow& r, int64_t i) {
         r.temperature = i % 4 == 0 ? 0.0f : 0.7f;
         r.top_p = i % 2 ? 0.95f : 1.0f;
         r.top_k = i % 3 ? 0 : 40;
         r.logit_bias = {{5, -1e9f}, {i, 2.0f}};
         r.stop_ids = {1, 2};
         r.suppress_stop = i % 5 == 0;
         r.logprobs = i % 8 == 0 ? 20 : -1;
       }},
  };
  for (const Config& c : configs) {
    const SamplingBatch batch = SamplingBatch::from_rows(rows_with(a.batch, c.set), a.vocab).to(device);
    report(c.name, time_calls(a, device, [&] { (void)engine::sample(logits, batch); }));
  }
  // Components, for reading the totals above.
  const SamplingBatch batch = SamplingBatch::from_rows(rows_with(a.batch, [](SamplingRow&, int64_t) {}), a.vocab).to(device);
  report("  part: mix_seed + gumbel_noise, ATen ops", time_calls(a, device, [&] {
           (void)engine::gumbel_noise(engine::mix_seed(batch.seed, batch.position), a.vocab, engine::NoiseKernel::kAten);
         }));
  if (device.is_cuda()) {  // the fused noise kernel (engine/cuda/gumbel_noise.h), sample()'s default on CUDA
    report("  part: mix_seed + gumbel_noise, fused kernel", time_calls(a, device, [&] {
             (void)engine::gumbel_noise(engine::mix_seed(batch.seed, batch.position), a.vocab, engine::NoiseKernel::kFused);
           }));
  }
  const at::Tensor f32 = logits.to(at::kFloat);
  report("  part: at::sort of the logits", time_calls(a, device, [&] { (void)at::sort(f32, 1, true); }));
  return 0;
}

}  // namespace
}  // namespace deepinfer::bench

int main(int argc, char** argv) {
  return deepinfer::bench::bench_main("sampler_bench", [&] { return deepinfer::bench::run(deepinfer::bench::parse(argc, argv)); });
}
