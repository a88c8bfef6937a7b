#pragma once
// The memory plan of one rank, made before any weight is loaded and printed at the start of a
// job: the weights as held, the routed experts' scratch, the state pool (blocks and slots), the
// activation reserve of the largest step and a runtime reserve, against the memory the device
// has free (CUDA) or the system has available (CPU). A plan that does not fit is refused with
// what to change: fewer blocks, a smaller step, or more ranks to spread the routed experts over.
// Owns: adding up, the fit and the advice. Does not own: the size of each part
// (ModelWeights::held_bytes, ExpertWorkspace::scratch_bytes, ModelCache::bytes_per_block/slot,
// model::step_workspace_bytes), or printing (launch/).

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#include "pipeline/engine_options.h"
#include "pipeline/model_source.h"

namespace deepinfer::pipeline {

struct MemoryPlan {
  int rank = 0, world_size = 1;
  std::string device;          // "cuda:0", "cpu"
  int64_t expert_weights = 0;  // the routed experts this rank holds
  int64_t other_weights = 0;   // everything else (replicated on every rank)
  int64_t experts_held = 0, experts_total = 0;
  int64_t expert_scratch = 0;
  int64_t num_blocks = 0, bytes_per_block = 0;
  int64_t num_slots = 0, bytes_per_slot = 0;
  int64_t activations = 0;  // model::step_workspace_bytes at the job's step budget
  int64_t graph_pool = 0;   // CUDA graphs' shared pool: the workspace of the largest decode bucket (engine/decode_graphs.h)
  int64_t step_tokens = 0, max_context = 0;
  int64_t runtime_reserve = 0;  // CUDA: cuBLAS and NCCL workspaces, allocator rounding
  int64_t available = 0;

  int64_t weights() const { return expert_weights + other_weights; }
  int64_t state() const { return num_blocks * bytes_per_block + num_slots * bytes_per_slot; }
  int64_t needed() const { return weights() + expert_scratch + state() + activations + graph_pool + runtime_reserve; }
  bool fits() const { return needed() <= available; }
};

// The plan of `rank` for the model `layout` describes, run with `engine`'s pools and step budget,
// against `available` bytes.
MemoryPlan plan_memory(const ModelLayout& layout, const EngineOptions& engine, int rank, int world_size, int64_t available);

// Bytes free on a CUDA device (cudaMemGetInfo), or MemAvailable of /proc/meminfo for the CPU.
int64_t available_memory(at::Device device);

// The plan as a few lines: one per part, then the total against what is available.
std::string describe(const MemoryPlan& plan);

// What to change so that the plan fits (empty when it fits): the largest num_blocks that fits,
// or else the smallest rank count whose share of the routed experts fits, or else a smaller step.
// `layout` and `engine` as given to plan_memory.
std::string advice(const MemoryPlan& plan, const ModelLayout& layout, const EngineOptions& engine);

}  // namespace deepinfer::pipeline
