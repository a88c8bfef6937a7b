#pragma once
// ModelRunner: the StepExecutor that runs the model. It consumes a SchedulerOutput snapshot
// and never re-derives policy: builds the flat batch on the device, substitutes decode tokens
// still on the device from the previous step (kPendingToken), runs the forward, samples, and
// starts the copy of the sampled tokens to the host. Every read of a device result happens in
// PendingStep::wait(), so process(N-1) overlaps execute(N).
// Owns: the cache tensors behind block and slot ids (model::ModelCache) and the device copy
// of the last sampled tokens. Does not own: weights (caller), scheduling, records.

#include <ATen/ATen.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <unordered_map>

#include "engine/step_executor.h"
#include "model/deepseek_v4_model.h"

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

 private:
  void check_pool_ids(const ScheduledSeq& row, int64_t step) const;

  Options options_;
  model::DeepseekV4Model model_;
  model::ModelCache cache_;
  at::Tensor last_tokens_;                        // [S] int64 on the device: step N-1's samples
  std::unordered_map<SeqId, int64_t> last_rows_;  // sequence -> row of last_tokens_
  int64_t last_step_ = -1;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> debug_logits_{nullptr, &std::fclose};
};

}  // namespace deepinfer::engine
