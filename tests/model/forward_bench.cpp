// forward_bench: the time of one decode step of the model (forward only, no sampling) and the
// number of ATen operator calls it makes (each one a kernel launch or more on a GPU).
//
//   forward_bench --config configs/models/tiny.json [--device cuda|cpu] [--batch 64]
//                 [--context 512] [--iters 20] [--warmup 3]
//
// Random weights (random_weights.h, in the storage format the config announces as random: does,
// bfloat16 on CUDA, float32 on the CPU); each of --batch sequences is prefilled with --context
// random tokens in one chunk, then every timed step decodes one token per sequence at the next
// position (writing the state like the job does). Prints the hardware, the shapes, the median /
// min / max step time of --iters steps after --warmup untimed ones (CUDA events on the GPU),
// and the operator calls per step (outermost ones, counted through at::RecordFunction), so a
// step's launch overhead can be read next to its time.

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/version.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "io/durable_file.h"
#include "model/deepseek_v4_model.h"
#include "model/model_config.h"
#include "model/random_weights.h"
#include "tests/engine/bench_device.h"

namespace deepinfer::bench {
namespace {

struct Args {
  std::string config;
  std::string device = at::hasCUDA() ? "cuda" : "cpu";
  int64_t batch = 64;
  int64_t context = 512;
  int iters = 20;
  int warmup = 3;
};

Args parse(int argc, char** argv) {
  Args a;
  for (const auto& [key, value] : option_pairs(argc, argv)) {
    if (key == "--config") a.config = value;
    else if (key == "--device") a.device = value;
    else if (key == "--batch") a.batch = std::stoll(value);
    else if (key == "--context") a.context = std::stoll(value);
    else if (key == "--iters") a.iters = std::stoi(value);
    else if (key == "--warmup") a.warmup = std::stoi(value);
    else TORCH_CHECK(false, "unknown option ", key, " (see the comment at the top of forward_bench.cpp)");
  }
  TORCH_CHECK(!a.config.empty(), "--config FILE is required");
  TORCH_CHECK(a.device == "cuda" || a.device == "cpu", "--device must be cuda or cpu, got ", a.device);
  TORCH_CHECK(a.batch > 0 && a.context > 0 && a.iters > 0 && a.warmup >= 0, "--batch, --context, --iters must be > 0");
  return a;
}

// Outermost operator calls on the main thread while counting is on, by name.
thread_local int g_depth = 0;
bool g_counting = false;
std::map<std::string, int64_t> g_calls;

std::unique_ptr<at::ObserverContext> on_enter(const at::RecordFunction& fn) {
  if (g_counting && g_depth == 0) ++g_calls[fn.name()];
  ++g_depth;
  return nullptr;
}
void on_exit(const at::RecordFunction&, at::ObserverContext*) { --g_depth; }

int run(const Args& a) {
  const at::Device device = a.device == "cuda" ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
  const std::string text = io::read_file(a.config);
  const model::ModelConfig config = model::parse_model_config(text, a.config);
  const model::WeightFormat format = model::announced_format(text, device.is_cuda() ? io::DType::kBF16 : io::DType::kF32);
  const at::ScalarType dtype = device.is_cuda() ? at::kBFloat16 : at::kFloat;
  const model::ModelWeights weights = model::random_weights(config, format, /*seed=*/0, device);
  model::SingleRankCommunicator comm;
  const model::DeepseekV4Model model(weights, comm, {});
  const int64_t blocks_per_seq = (a.context + a.warmup + a.iters + 127) / 128 + 1;
  model::ModelCache cache(config, {.num_blocks = 1 + a.batch * blocks_per_seq, .num_slots = 1 + a.batch, .dtype = dtype, .device = device});
  std::printf("forward_bench: %s | LibTorch %s | %s (%lld layers, hidden %lld, %lld experts%s) | %s | batch %lld, context %lld | "
              "warm-up %d, timed %d\n",
              describe_device(device).c_str(), TORCH_VERSION, a.config.c_str(), static_cast<long long>(config.num_layers),
              static_cast<long long>(config.hidden_size), static_cast<long long>(config.n_routed_experts),
              format.fp4_experts ? ", FP4" : "", dtype == at::kBFloat16 ? "bfloat16" : "float32", static_cast<long long>(a.batch),
              static_cast<long long>(a.context), a.warmup, a.iters);

  std::mt19937_64 rng(1);
  auto block_table = [&](int64_t b) {
    std::vector<int32_t> table;
    for (int64_t k = 0; k < blocks_per_seq; ++k) table.push_back(static_cast<int32_t>(1 + b * blocks_per_seq + k));
    return table;
  };
  for (int64_t b = 0; b < a.batch; ++b) {  // prefill, one sequence per forward
    model::BatchInput input;
    std::vector<int64_t> tokens(static_cast<size_t>(a.context));
    for (auto& t : tokens) t = static_cast<int64_t>(rng() % static_cast<uint64_t>(config.vocab_size));
    input.tokens.push_back(tokens);
    input.start_positions.push_back(0);
    input.block_tables.push_back(block_table(b));
    input.state_slots.push_back(static_cast<int32_t>(1 + b));
    input.sample_rows.push_back(a.context - 1);
    (void)model.forward(model::ForwardBatch::build(input, device), cache);
  }
  int64_t position = a.context;
  auto decode_step = [&] {
    model::BatchInput input;
    for (int64_t b = 0; b < a.batch; ++b) {
      input.tokens.push_back({static_cast<int64_t>(rng() % static_cast<uint64_t>(config.vocab_size))});
      input.start_positions.push_back(position);
      input.block_tables.push_back(block_table(b));
      input.state_slots.push_back(static_cast<int32_t>(1 + b));
      input.sample_rows.push_back(b);
    }
    ++position;
    (void)model.forward(model::ForwardBatch::build(input, device), cache);
  };
  std::vector<double> ms = time_calls(device, a.warmup, a.iters, decode_step);
  std::sort(ms.begin(), ms.end());
  const auto handle = at::addGlobalCallback(at::RecordFunctionCallback(on_enter, on_exit).scopes({at::RecordScope::FUNCTION}));
  g_counting = true;
  decode_step();
  g_counting = false;
  at::removeCallback(handle);
  int64_t calls = 0;
  std::vector<std::pair<int64_t, std::string>> by_count;
  for (const auto& [name, n] : g_calls) {
    calls += n;
    by_count.emplace_back(n, name);
  }
  std::sort(by_count.rbegin(), by_count.rend());
  std::printf("decode step (forward, %lld rows): median %.3f ms   min %.3f   max %.3f   (n=%zu); %lld operator calls per step\n",
              static_cast<long long>(a.batch), ms[ms.size() / 2], ms.front(), ms.back(), ms.size(), static_cast<long long>(calls));
  std::printf("most called:");
  for (size_t i = 0; i < std::min<size_t>(12, by_count.size()); ++i) std::printf(" %s %lld,", by_count[i].second.c_str(), static_cast<long long>(by_count[i].first));
  std::printf("\n");
  return 0;
}

}  // namespace
}  // namespace deepinfer::bench

int main(int argc, char** argv) {
  return deepinfer::bench::bench_main("forward_bench", [&] { return deepinfer::bench::run(deepinfer::bench::parse(argc, argv)); });
}
