#pragma once
// ModelRunner: the StepExecutor that runs the model. It consumes a SchedulerOutput snapshot
// and never re-derives policy: builds the step's inputs on the host and sends them in one
// asynchronous copy (model/step_staging.h), substitutes decode tokens still on the device from the
// previous step (kPendingToken), runs the forward, samples, and starts the copy of the sampled
// tokens to the host. execute() never waits for the device: every read of a device result happens
// in PendingStep::wait(), so process(N-1) and schedule(N+1) overlap step N on the GPU.
// On CUDA, decode steps are padded to buckets and replayed from CUDA graphs (decode_graphs.h).
// Owns: the cache tensors behind block and slot ids (model::ModelCache) and the device copy
// of the last sampled tokens. Does not own: weights (caller), scheduling, records.

#include <ATen/ATen.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "engine/decode_graphs.h"
#include "engine/prompt_logprobs.h"
#include "engine/sampling_batch.h"
#include "engine/step_executor.h"
#include "model/deepseek_v4_model.h"
#include "model/step_staging.h"

namespace deepinfer::engine {

class ModelRunner final : public StepExecutor {
 public:
  struct Options {
    // The pools behind the scheduler's ids: pipeline::engine_options derives both sides from one
    // config; execute() checks every id it is given against them (block 0 / slot 0 are padding).
    int64_t num_blocks = 0;
    int64_t num_slots = 0;
    at::ScalarType dtype = at::kFloat;
    at::Device device = at::kCPU;
    model::DeepseekV4Model::Options model;
    // Decode steps replayed from CUDA graphs (CUDA, one rank, no part clock and no logits dump;
    // decode steps are padded to their buckets either way). --no-cuda-graphs turns it off.
    bool cuda_graphs = true;
    // The widest block table a sequence can have (ceil(max_model_len / 128)); 0: num_blocks.
    int64_t max_blocks_per_seq = 0;
    // Decode steps padded to their buckets on the CPU too (tests: the padding rows are inert);
    // on CUDA they always are.
    bool pad_decode_on_cpu = false;
    // Debugging: when set, every sampled row's logits are appended to this file as JSONL
    // {"seed": S, "position": P, "logits": [...]} (a host copy per step: slow). Rows are keyed
    // by (sequence seed, output position), which names the same token in any batch, rank or
    // rerun, so two runs' dumps can be compared (tests/launch/mpi_generate_test.sh does); two
    // requests given the same explicit seed collide, and a recomputed row is written again.
    std::string debug_logits_path;
  };
  // `weights` and `comm` must outlive the runner.
  ModelRunner(const model::ModelWeights& weights, model::ExpertCommunicator& comm, Options options);

  // Throws InternalError naming the sequence and the id when a row's block or slot id does not
  // fit the pools (a scheduler and runner sized differently).
  std::unique_ptr<PendingStep> execute(const SchedulerOutput& out) override;
  // One token at position 0 on padding block 0 / slot 0, nothing sampled; leaves the
  // previous step's sampled tokens (pending decode inputs) untouched.
  void execute_dummy() override;

  const model::ModelConfig& config() const { return model_.config(); }
  const DecodeGraphs::Stats& graph_stats() const { return graphs_.stats(); }

 private:
  struct StepPlan;
  void check_pool_ids(const ScheduledSeq& row, int64_t step) const;
  StepPlan plan(const SchedulerOutput& out) const;
  void pad_decode(StepPlan& plan) const;
  SampleResult run_step(model::ForwardBatch& batch, const at::Tensor& sources, const SamplingBatch* params, PromptScores& prompt,
                        const std::vector<SamplingRow>& sampling);

  Options options_;
  model::DeepseekV4Model model_;
  model::ModelCache cache_;
  model::StepStaging staging_;
  DecodeGraphs graphs_;
  int64_t comm_world_ = 1;
  std::optional<c10::Stream> stream_;             // CUDA: the runner's own stream, current during its steps
  at::Tensor last_tokens_;                        // int64 on the device: step N-1's samples in its first rows
  std::unordered_map<SeqId, int64_t> last_rows_;  // sequence -> row of last_tokens_
  int64_t last_step_ = -1;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> debug_logits_{nullptr, &std::fclose};
};

}  // namespace deepinfer::engine
