// forward_bench: the time of one decode step of the model (forward only, no sampling) and the
// number of ATen operator calls it makes (each one a kernel launch or more on a GPU).
//
//   forward_bench --config configs/models/tiny.json [--device cuda|cpu] [--batch 64]
//                 [--context 512] [--iters 20] [--warmup 3] [--prefill-chunk 8192]
//                 [--breakdown 1] [--hbm-tbps 4.3] [--tflops 790] [--attention gathered|paged]
//                 [--head-split 1] [--early-inputs 1]
//
// Random weights (random_weights.h, in the storage format the config announces as random: does,
// bfloat16 on CUDA, float32 on the CPU); sequence 0 is prefilled with --context random tokens in
// chunks of --prefill-chunk, and its state (window ring, compressor tails, compressed entries) is
// copied to the other --batch - 1 sequences' slots and blocks, so long contexts (4K .. 128K) cost
// one prefill. Every timed step then decodes one token per sequence at the next position
// (writing the state like the job does). Prints the hardware, the shapes, the median / min / max
// step time of --iters steps after --warmup untimed ones (CUDA events on the GPU) against the
// step's roofline floor (model/step_cost.h), the operator calls per step (outermost ones,
// counted through at::RecordFunction), and with --breakdown 1 the device time of each part of a
// step (engine/part_timer.h). A cache that does not fit is reported and the run skipped.
// --head-split 1 runs the Hopper head-split attention kernel under test where it applies
// (AttentionOptions::head_split); --early-inputs 1 has the attention load q before its wait for
// the launch before it (AttentionOptions::early_inputs).

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/version.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/part_timer.h"
#include "io/durable_file.h"
#include "model/arithmetic.h"
#include "model/deepseek_v4_model.h"
#include "model/model_config.h"
#include "model/random_weights.h"
#include "model/step_cost.h"
#include "tests/engine/bench_device.h"

namespace deepinfer::bench {
namespace {

// The official arithmetic on the ATen path everywhere (--attention gathered): attention over
// gathered keys, the indexer through at::topk, the compressor's, mHC's and the projections'
// norm and RoPE ATen ops; the "before" of the kernels (model/cuda/sparse_attention.cu,
// index_scores.cu, index_topk.cu, compressor.cu, hyper_connection.cu, rope.cu; hc_expand's
// kernel stays).
class GatheredAttention final : public model::Arithmetic {
 public:
  bool attends_in_place(const at::Tensor&, const at::Tensor&) const override { return false; }
  bool compresses_in_place(const at::Tensor&, const at::Tensor&) const override { return false; }
  bool mixes_in_place(const at::Tensor&) const override { return false; }
  bool ropes_in_place(const at::Tensor&) const override { return false; }
};

struct Args {
  std::string config;
  std::string device = at::hasCUDA() ? "cuda" : "cpu";
  std::vector<int64_t> batches{64};  // --batch 1,64,256: decode steps at each, over one prefilled context
  int64_t context = 512;
  int iters = 20;
  int warmup = 3;
  int64_t prefill_chunk = 8192;
  bool breakdown = false;
  bool gathered = false;      // --attention gathered: attention and compressor on the ATen path, not the kernels
  bool head_split = false;    // --head-split 1: AttentionOptions::head_split
  bool early_inputs = false;  // --early-inputs 1: AttentionOptions::early_inputs
  double bytes_per_s = 4.3e12;
  double flops_per_s = 790e12;
};

std::vector<int64_t> int_list(const std::string& text) {
  std::vector<int64_t> out;
  for (size_t start = 0; start <= text.size();) {
    const size_t comma = std::min(text.find(',', start), text.size());
    out.push_back(std::stoll(text.substr(start, comma - start)));
    start = comma + 1;
  }
  return out;
}

Args parse(int argc, char** argv) {
  Args a;
  for (const auto& [key, value] : option_pairs(argc, argv)) {
    if (key == "--config")
      a.config = value;
    else if (key == "--device")
      a.device = value;
    else if (key == "--batch")
      a.batches = int_list(value);
    else if (key == "--context")
      a.context = std::stoll(value);
    else if (key == "--iters")
      a.iters = std::stoi(value);
    else if (key == "--warmup")
      a.warmup = std::stoi(value);
    else if (key == "--prefill-chunk")
      a.prefill_chunk = std::stoll(value);
    else if (key == "--attention")
      a.gathered = value == "gathered";
    else if (key == "--head-split")
      a.head_split = value != "0";
    else if (key == "--early-inputs")
      a.early_inputs = value != "0";
    else if (key == "--breakdown")
      a.breakdown = value != "0";
    else if (key == "--hbm-tbps")
      a.bytes_per_s = std::stod(value) * 1e12;
    else if (key == "--tflops")
      a.flops_per_s = std::stod(value) * 1e12;
    else
      TORCH_CHECK(false, "unknown option ", key, " (see the comment at the top of forward_bench.cpp)");
  }
  TORCH_CHECK(!a.config.empty(), "--config FILE is required");
  TORCH_CHECK(a.device == "cuda" || a.device == "cpu", "--device must be cuda or cpu, got ", a.device);
  TORCH_CHECK(!a.batches.empty() && *std::min_element(a.batches.begin(), a.batches.end()) > 0 && a.context > 0 && a.iters > 0 &&
                  a.warmup >= 0 && a.prefill_chunk > 0,
              "--batch, --context, --iters, --prefill-chunk must be > 0");
  return a;
}

// Outermost operator calls on the main thread while counting is on, by name and by the part of
// the forward that made them.
thread_local int g_depth = 0;
bool g_counting = false;
std::map<std::string, int64_t> g_calls;
std::map<std::pair<model::ForwardPart, int64_t>, int64_t> g_calls_by_part;  // (part, layer)

// Knows which part of the forward runs now (for the call counts) and passes the marks on to the
// breakdown's timer when there is one.
class PartTracker final : public model::PartClock {
 public:
  explicit PartTracker(model::PartClock* timer) : timer_(timer) {}
  void enter(model::ForwardPart part, int64_t layer) override {
    current = {part, layer};
    if (timer_ != nullptr) timer_->enter(part, layer);
  }
  void end_step(bool decode) override {
    if (timer_ != nullptr) timer_->end_step(decode);
  }
  std::pair<model::ForwardPart, int64_t> current{model::ForwardPart::kStaging, -1};

 private:
  model::PartClock* timer_;
};
PartTracker* g_tracker = nullptr;

std::unique_ptr<at::ObserverContext> on_enter(const at::RecordFunction& fn) {
  if (g_counting && g_depth == 0) {
    ++g_calls[fn.name()];
    if (g_tracker != nullptr) ++g_calls_by_part[g_tracker->current];
  }
  ++g_depth;
  return nullptr;
}
void on_exit(const at::RecordFunction&, at::ObserverContext*) { --g_depth; }

// The cache tensors of sequence 0 (slot 1, blocks 1..per_seq) copied to sequences 1..batch-1
// (slots 2..batch, blocks per_seq+1..batch*per_seq), in place through broadcasting views.
void replicate_state(model::ModelCache& cache, int64_t num_layers, int64_t batch, int64_t per_seq) {
  if (batch == 1) return;
  auto copy_rows = [&](at::Tensor& t, int64_t rows) {  // rows per sequence: 1 slot or per_seq blocks
    if (!t.defined()) return;
    std::vector<int64_t> shape{batch - 1, rows};
    shape.insert(shape.end(), t.sizes().begin() + 1, t.sizes().end());
    const at::Tensor source = t.narrow(0, 1, rows).unsqueeze(0);
    t.narrow(0, 1 + rows, (batch - 1) * rows).view(shape).copy_(source.expand(shape));
  };
  for (int64_t l = 0; l < num_layers; ++l) {
    model::LayerCache& c = cache.layer(l);
    for (at::Tensor* t : {&c.window, &c.tail.kv, &c.tail.score, &c.index_tail.kv, &c.index_tail.score}) copy_rows(*t, 1);
    for (at::Tensor* t : {&c.compressed, &c.index_keys}) copy_rows(*t, per_seq);
  }
}

void print_breakdown(engine::PartTimer& timer) {
  const std::vector<engine::PartTimer::Row> rows = timer.totals();
  const double steps = static_cast<double>(std::max<int64_t>(timer.steps(), 1));
  double total = 0;
  for (const auto& row : rows) total += row.ms;
  std::printf("breakdown over %lld steps (device time per step, %.3f ms in all):\n", static_cast<long long>(timer.steps()), total / steps);
  for (const auto& row : rows) {
    std::printf("  %-22s %-3s %9.3f ms %5.1f%%\n", model::forward_part_name(row.part), row.layer_type.c_str(), row.ms / steps,
                100.0 * row.ms / std::max(total, 1e-12));
  }
}

// The model, its cache with sequence 0 prefilled to --context and copied to the others, and a
// decode step over the first b sequences.
struct Setup {
  const Args& a;
  at::Device device;
  model::ModelConfig config;
  std::unique_ptr<model::ModelWeights> weights;
  std::unique_ptr<model::ModelCache> cache;
  std::unique_ptr<engine::PartTimer> timer;
  std::unique_ptr<model::SingleRankCommunicator> comm;
  std::unique_ptr<model::DeepseekV4Model> model;
  int64_t per_seq = 0;  // blocks per sequence
  std::vector<int64_t> positions;
  std::mt19937_64 rng{1};

  std::vector<int32_t> block_table(int64_t b) const {
    std::vector<int32_t> table;
    for (int64_t k = 0; k < per_seq; ++k) table.push_back(static_cast<int32_t>(1 + b * per_seq + k));
    return table;
  }
  int64_t token() { return static_cast<int64_t>(rng() % static_cast<uint64_t>(config.vocab_size)); }

  void prefill() {  // sequence 0, chunk by chunk, then copied to the others
    for (int64_t start = 0; start < a.context; start += a.prefill_chunk) {
      model::BatchInput input;
      const int64_t len = std::min(a.prefill_chunk, a.context - start);
      std::vector<int64_t> tokens(static_cast<size_t>(len));
      for (auto& t : tokens) t = token();
      input.tokens.push_back(tokens);
      input.start_positions.push_back(start);
      input.block_tables.push_back(block_table(0));
      input.state_slots.push_back(1);
      input.sample_rows.push_back(len - 1);
      (void)model->forward(model::ForwardBatch::build(input, device), *cache);
    }
    replicate_state(*cache, config.num_layers, static_cast<int64_t>(positions.size()), per_seq);
    timer->reset();  // the prefill's marks do not count
  }

  void decode_step(int64_t batch) {
    model::BatchInput input;
    for (int64_t b = 0; b < batch; ++b) {
      input.tokens.push_back({token()});
      input.start_positions.push_back(positions[static_cast<size_t>(b)]++);
      input.block_tables.push_back(block_table(b));
      input.state_slots.push_back(static_cast<int32_t>(1 + b));
      input.sample_rows.push_back(b);
    }
    g_tracker->enter(model::ForwardPart::kStaging, -1);
    (void)model->forward(model::ForwardBatch::build(input, device), *cache);
    g_tracker->end_step(/*decode=*/true);
  }
};

// Decode steps of `batch` rows: times, breakdown, roofline, operator calls.
void time_batch(Setup& s, int64_t batch) {
  const Args& a = s.a;
  for (int w = 0; w < a.warmup; ++w) s.decode_step(batch);
  s.timer->reset();  // the breakdown covers the timed steps only
  std::vector<double> ms = time_calls(s.device, /*warmup=*/0, a.iters, [&] { s.decode_step(batch); });
  std::sort(ms.begin(), ms.end());
  if (a.breakdown) print_breakdown(*s.timer);
  const auto handle = at::addGlobalCallback(at::RecordFunctionCallback(on_enter, on_exit).scopes({at::RecordScope::FUNCTION}));
  g_calls.clear();
  g_calls_by_part.clear();
  g_counting = true;
  s.decode_step(batch);
  g_counting = false;
  at::removeCallback(handle);
  int64_t calls = 0;
  std::vector<std::pair<int64_t, std::string>> by_count;
  for (const auto& [name, n] : g_calls) {
    calls += n;
    by_count.emplace_back(n, name);
  }
  std::sort(by_count.rbegin(), by_count.rend());
  double context = 0;  // the timed steps' mean over the batch
  for (int64_t b = 0; b < batch; ++b) context += static_cast<double>(s.positions[static_cast<size_t>(b)]);
  context = context / static_cast<double>(batch) - (a.iters + 1) / 2.0;
  const model::StepCost cost = model::DecodeCost(*s.weights, 1).step(batch, context);
  const double floor = cost.floor_ms(a.bytes_per_s, a.flops_per_s);
  std::printf(
      "decode step (forward, batch %lld, context %lld): median %.3f ms   min %.3f   max %.3f   (n=%zu); %lld operator calls per step\n",
      static_cast<long long>(batch), static_cast<long long>(context), ms[ms.size() / 2], ms.front(), ms.back(), ms.size(),
      static_cast<long long>(calls));
  std::printf("roofline floor %.3f ms (%.3f GB weights + %.3f GB state at %.2f TB/s, %.4f TFLOP at %.0f TFLOP/s): median / floor = %.2fx\n",
              floor, cost.weight_bytes / 1e9, cost.state_bytes / 1e9, a.bytes_per_s / 1e12, cost.flops / 1e12, a.flops_per_s / 1e12,
              ms[ms.size() / 2] / floor);
  std::printf("most called:");
  for (size_t i = 0; i < std::min<size_t>(12, by_count.size()); ++i)
    std::printf(" %s %lld,", by_count[i].second.c_str(), static_cast<long long>(by_count[i].first));
  std::printf("\n");
  std::map<model::ForwardPart, int64_t> per_part;  // summed over the layers
  for (const auto& [key, n] : g_calls_by_part) per_part[key.first] += n;
  std::printf("operator calls by part:");
  for (const auto& [part, n] : per_part) std::printf(" %s %lld,", model::forward_part_name(part), static_cast<long long>(n));
  std::printf("\n");
}

int run(const Args& a) {
  Setup s{a, a.device == "cuda" ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU), {}, {}, {}, {}, {}, {}};
  const std::string text = io::read_file(a.config);
  s.config = model::parse_model_config(text, a.config);
  const model::WeightFormat format = model::announced_format(text, s.device.is_cuda() ? io::DType::kBF16 : io::DType::kF32);
  const at::ScalarType dtype = s.device.is_cuda() ? at::kBFloat16 : at::kFloat;
  const int64_t max_batch = *std::max_element(a.batches.begin(), a.batches.end());
  s.per_seq = (a.context + static_cast<int64_t>(a.batches.size()) * (a.warmup + a.iters + 1) + 127) / 128;
  s.positions.assign(static_cast<size_t>(max_batch), a.context);
  const double cache_gb = 1e-9 * static_cast<double>((1 + max_batch * s.per_seq) * model::ModelCache::bytes_per_block(s.config, dtype) +
                                                     (1 + max_batch) * model::ModelCache::bytes_per_slot(s.config, dtype));
  std::printf(
      "forward_bench: %s | LibTorch %s | %s (%lld layers, hidden %lld, %lld experts%s) | %s | context %lld, batches up to %lld "
      "(cache %.2f GB) | warm-up %d, timed %d\n",
      describe_device(s.device).c_str(), TORCH_VERSION, a.config.c_str(), static_cast<long long>(s.config.num_layers),
      static_cast<long long>(s.config.hidden_size), static_cast<long long>(s.config.n_routed_experts), format.fp4_experts ? ", FP4" : "",
      dtype == at::kBFloat16 ? "bfloat16" : "float32", static_cast<long long>(a.context), static_cast<long long>(max_batch), cache_gb,
      a.warmup, a.iters);
  s.weights = std::make_unique<model::ModelWeights>(model::random_weights(s.config, format, /*seed=*/0, s.device));
  try {
    s.cache = std::make_unique<model::ModelCache>(
        s.config, model::ModelCache::Options{
                      .num_blocks = 1 + max_batch * s.per_seq, .num_slots = 1 + max_batch, .dtype = dtype, .device = s.device});
  } catch (const std::exception& error) {
    std::printf("skipped: the cache of %.2f GB does not fit next to the weights (%s)\n", cache_gb,
                std::string(error.what()).substr(0, 120).c_str());
    return 0;
  }
  std::vector<model::LayerType> layer_types;
  for (int64_t l = 0; l < s.config.num_layers; ++l) layer_types.push_back(s.config.layer_type(l));
  s.timer = std::make_unique<engine::PartTimer>(s.device, layer_types);
  s.comm = std::make_unique<model::SingleRankCommunicator>();
  model::DeepseekV4Model::Options options;
  static PartTracker tracker(a.breakdown ? s.timer.get() : nullptr);
  g_tracker = &tracker;
  options.clock = &tracker;
  static const GatheredAttention gathered;
  if (a.gathered) options.arithmetic = &gathered;
  options.attention.head_split = a.head_split;
  options.attention.early_inputs = a.early_inputs;
  const bool in_place =
      !a.gathered && model::Arithmetic::official().attends_in_place(
                         at::empty({1, s.config.num_heads, s.config.head_dim}, at::TensorOptions(s.device).dtype(dtype)),
                         at::empty({1, s.config.sliding_window, s.config.head_dim}, at::TensorOptions(s.device).dtype(dtype)));
  std::printf("attention: %s%s%s\n",
              in_place
                  ? "in place (model/cuda/sparse_attention.cu, index_scores.cu, index_topk.cu); compressor, mHC and norm + RoPE kernels"
                  : "over gathered keys; compressor, mHC sites, norms and RoPE in ATen ops",
              in_place && a.head_split ? "; the head-split kernel where it applies (CSA, SWA on Hopper)" : "",
              in_place && a.early_inputs ? "; q loaded before the attention's wait (early inputs)" : "");
  s.model = std::make_unique<model::DeepseekV4Model>(*s.weights, *s.comm, options);
  s.prefill();
  for (int64_t batch : a.batches) {
    try {
      time_batch(s, batch);
    } catch (const std::exception& error) {  // a step that runs out of memory at this batch
      std::printf("batch %lld: skipped (%s)\n", static_cast<long long>(batch), std::string(error.what()).substr(0, 160).c_str());
    }
  }
  return 0;
}

}  // namespace
}  // namespace deepinfer::bench

int main(int argc, char** argv) {
  return deepinfer::bench::bench_main("forward_bench", [&] { return deepinfer::bench::run(deepinfer::bench::parse(argc, argv)); });
}
