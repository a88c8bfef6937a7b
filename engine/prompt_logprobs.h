#pragma once
// PromptScores: the prompt logprobs of one step (SamplingParams::prompt_logprobs). A prefill row
// that scores its prompt (ScheduledSeq::prompt_scored) asks the forward for the final hidden
// states of those rows (BatchInput::score_rows); each row's logits, through the model's head in
// slices of kSliceRows rows (what the memory plan counts, model/step_cost.h), give the
// logprob of the prompt token after it and the top N there, with the sampler's arithmetic
// (sampler.h token_logprobs: the same bits on every device). The sampled rows are computed apart,
// so asking for prompt logprobs changes no sampled token.
// Owns: the scored rows' bookkeeping, their device results and the host copies. Does not own:
// the forward (the model runner calls it) or where the results go (the job keeps the first value
// of each position, so a recomputed prompt adds nothing).

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "engine/scheduler_output.h"
#include "engine/step_executor.h"
#include "model/deepseek_v4_model.h"
#include "model/step_cost.h"

namespace deepinfer::engine {

class PromptScores final {
 public:
  static constexpr int64_t kSliceRows = model::kScoreSliceRows;

  // The scored rows of `row`, whose query tokens sit at flat rows flat_first, flat_first + 1, ...
  void add(const ScheduledSeq& row, int64_t flat_first);
  bool empty() const { return flat_rows_.empty(); }
  const std::vector<int64_t>& flat_rows() const { return flat_rows_; }  // for BatchInput::score_rows

  // hidden [P, D]: the forward's final hidden rows of flat_rows(), on `device`. Queues the
  // logprobs and top N on the device, then their copies to the host (pinned, asynchronous on
  // CUDA): a caller's event recorded after this covers them.
  void compute(const model::DeepseekV4Model& model, const at::Tensor& hidden, at::Device device);

  // Once the step's event has passed: one entry per scored row, in batch order.
  std::vector<PromptLogprobs> results() const;

 private:
  struct Row {
    SeqId seq_id = -1;
    int32_t epoch = 0;
    int32_t first_position = 0;  // of the first prompt token scored
    int32_t count = 0;
    int32_t top_n = 0;
  };
  std::vector<Row> rows_;
  std::vector<int64_t> flat_rows_, targets_;
  int64_t top_n_ = 0;                             // the most any row asks
  at::Tensor logprobs_, top_ids_, top_logprobs_;  // host: [P], [P, top_n_], [P, top_n_]
};

}  // namespace deepinfer::engine
