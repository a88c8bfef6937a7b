#include "pipeline/memory_plan.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "engine/cuda/kernels.h"
#include "engine/decode_graphs.h"
#include "model/cuda/kernels.h"
#include "model/model_cache.h"
#include "model/moe_grouped.h"
#include "model/step_cost.h"
#include "model/weights.h"

namespace deepinfer::pipeline {
namespace {

constexpr int64_t kCudaRuntimeReserve = int64_t{1} << 30;

std::string gib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", static_cast<double>(bytes) / double(int64_t{1} << 30));
  return text;
}

std::string mib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f MiB", static_cast<double>(bytes) / double(int64_t{1} << 20));
  return text;
}

// A layout's weights on `rank` of `world_size`, split into routed experts and the rest.
std::pair<int64_t, int64_t> weight_bytes(const ModelLayout& layout, at::ScalarType dtype, const model::ExpertRange& experts) {
  std::vector<model::WeightSpec> expert_specs, other_specs;
  for (auto& spec : model::weight_specs(layout.config, layout.format, experts))
    (spec.expert >= 0 ? expert_specs : other_specs).push_back(std::move(spec));
  return {model::ModelWeights::held_bytes(expert_specs, dtype, layout.keep_fp8),
          model::ModelWeights::held_bytes(other_specs, dtype, layout.keep_fp8)};
}

// MemAvailable of /proc/meminfo in bytes; 0 if unreadable.
int64_t system_available() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

}  // namespace

MemoryPlan plan_memory(const ModelLayout& layout, const EngineOptions& engine, int rank, int world_size, int64_t available) {
  const model::ModelConfig& c = layout.config;
  const engine::ModelRunner::Options& runner = engine.runner;
  const model::ExpertRange held = model::expert_range_for_rank(c.n_routed_experts, rank, world_size);
  MemoryPlan p;
  p.rank = rank;
  p.world_size = world_size;
  p.device = runner.device.str();
  std::tie(p.expert_weights, p.other_weights) = weight_bytes(layout, runner.dtype, held);
  p.experts_held = held.size();
  p.experts_total = c.n_routed_experts;
  p.expert_scratch = model::ExpertWorkspace::scratch_bytes(c, layout.format.fp4_experts, held.size(), runner.dtype, runner.device);
  p.num_blocks = runner.num_blocks;
  p.bytes_per_block = model::ModelCache::bytes_per_block(c, runner.dtype);
  p.num_slots = runner.num_slots;
  p.bytes_per_slot = model::ModelCache::bytes_per_slot(c, runner.dtype);
  p.step_tokens = engine.scheduler.max_num_batched_tokens;
  p.max_context = engine.scheduler.max_model_len;
  // The CUDA build's bfloat16 forward attends in place (Arithmetic::attends_in_place): its kernels take
  // every DeepSeek-V4 shape.
  const bool in_place = runner.device.is_cuda() && runner.dtype == at::kBFloat16 && model::cuda::built();
  p.activations = model::step_workspace_bytes(c, runner.dtype,
                                              {.tokens = p.step_tokens,
                                               .max_seqs = engine.scheduler.max_num_seqs,
                                               .sampled_rows = engine.scheduler.max_num_seqs,
                                               .max_context = p.max_context,
                                               .in_place = in_place});
  // Graphs replay one at a time from one pool: it holds what the largest bucket's capture allocated.
  if (runner.device.is_cuda() && runner.cuda_graphs && world_size == 1) {
    const int64_t bucket = engine::decode_bucket(engine.scheduler.max_num_seqs);
    p.graph_pool = model::step_workspace_bytes(
        c, runner.dtype,
        {.tokens = bucket, .max_seqs = bucket, .sampled_rows = bucket, .max_context = p.max_context, .in_place = in_place});
  }
  p.runtime_reserve = runner.device.is_cuda() ? kCudaRuntimeReserve : 0;
  p.available = available;
  return p;
}

int64_t available_memory(at::Device device) {
  if (device.is_cuda()) return engine::cuda::device_memory(device).free;
  return system_available();
}

std::string describe(const MemoryPlan& p) {
  std::ostringstream out;
  out << "memory plan, rank " << p.rank << " of " << p.world_size << " on " << p.device << ":\n";
  out << "  weights          " << gib(p.weights()) << " (routed experts " << gib(p.expert_weights) << ": " << p.experts_held << " of "
      << p.experts_total << " per layer; the rest " << gib(p.other_weights) << ")\n";
  out << "  expert scratch   " << gib(p.expert_scratch) << " (bfloat16 copies of dense experts; FP4 ones run in place)\n";
  out << "  state pool       " << gib(p.state()) << " (" << p.num_blocks << " blocks x " << mib(p.bytes_per_block) << " = "
      << p.num_blocks * 128 << " tokens of compressed state; " << p.num_slots << " slots x " << mib(p.bytes_per_slot) << ")\n";
  out << "  activations      " << gib(p.activations) << " (a step of " << p.step_tokens << " tokens, contexts up to " << p.max_context
      << ")\n";
  if (p.graph_pool > 0) out << "  CUDA graphs      " << gib(p.graph_pool) << " (one pool for every decode bucket's graph)\n";
  out << "  runtime reserve  " << gib(p.runtime_reserve) << "\n";
  out << "  total            " << gib(p.needed()) << " of " << gib(p.available) << (p.device == "cpu" ? " available" : " free") << ": "
      << (p.fits() ? "fits (" + gib(p.available - p.needed()) + " spare)" : "does not fit");
  return out.str();
}

std::string advice(const MemoryPlan& p, const ModelLayout& layout, const EngineOptions& engine) {
  if (p.fits()) return {};
  const int64_t without_blocks = p.needed() - p.num_blocks * p.bytes_per_block;
  constexpr int64_t kMinBlocks = 2;  // the padding block and one more
  if (without_blocks + kMinBlocks * p.bytes_per_block <= p.available) {
    const int64_t blocks = (p.available - without_blocks) / std::max<int64_t>(p.bytes_per_block, 1);
    return "lower num_blocks (--num-blocks or the job file) from " + std::to_string(p.num_blocks) + " to at most " +
           std::to_string(blocks) + " (" + std::to_string(blocks * 128) + " tokens of compressed state over all running sequences)";
  }
  for (int world = p.world_size + 1; world <= p.experts_total; ++world) {
    const MemoryPlan wider = plan_memory(layout, engine, 0, world, p.available);
    if (wider.needed() - wider.num_blocks * wider.bytes_per_block + kMinBlocks * wider.bytes_per_block <= wider.available) {
      return "the weights do not fit " + std::to_string(p.world_size) + " rank" + (p.world_size > 1 ? "s" : "") + ": run at least " +
             std::to_string(world) + " ranks (mpirun -np " + std::to_string(world) + ", one GPU each: " + gib(wider.weights()) +
             " of weights per GPU" + (wider.fits() ? "" : ", with num_blocks lowered as that plan says") + ")";
    }
  }
  return "no rank count fits: the weights every rank holds whatever the rank count take " + gib(p.other_weights) + " and a step of " +
         std::to_string(p.step_tokens) + " tokens " + gib(p.activations) +
         "; lower max_num_batched_tokens or max_model_len, or use a smaller model";
}

}  // namespace deepinfer::pipeline
