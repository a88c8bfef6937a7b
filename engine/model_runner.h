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
#include <memory>
#include <unordered_map>

#include "engine/step_executor.h"
#include "model/deepseek_v4_model.h"

namespace deepinfer::engine {

class ModelRunner final : public StepExecutor {
 public:
  struct Options {
    int64_t num_blocks = 0;  // must equal the scheduler's (block 0 is padding)
    int64_t num_slots = 0;   // must equal the scheduler's (slot 0 is padding)
    at::ScalarType dtype = at::kFloat;
    at::Device device = at::kCPU;
    model::DeepseekV4Model::Options model;
  };
  // `weights` and `comm` must outlive the runner.
  ModelRunner(const model::ModelWeights& weights, model::ExpertCommunicator& comm, Options options);

  std::unique_ptr<PendingStep> execute(const SchedulerOutput& out) override;
  // One token at position 0 on padding block 0 / slot 0, nothing sampled; leaves the
  // previous step's sampled tokens (pending decode inputs) untouched.
  void execute_dummy() override;

  const model::ModelConfig& config() const { return model_.config(); }

 private:
  Options options_;
  model::DeepseekV4Model model_;
  model::ModelCache cache_;
  at::Tensor last_tokens_;                          // [S] int64 on the device: step N-1's samples
  std::unordered_map<SeqId, int64_t> last_rows_;    // sequence -> row of last_tokens_
  int64_t last_step_ = -1;
};

}  // namespace deepinfer::engine
