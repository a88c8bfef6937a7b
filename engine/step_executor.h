#pragma once
// StepExecutor: what runs a step. execute(N) takes a SchedulerOutput snapshot and returns
// at once with a PendingStep; the step's results are read only in PendingStep::wait(), so
// the caller can process(N-1) while step N runs (zero-overhead scheduling, design 3).
// Implementations: the ModelRunner (engine/model_runner.h, torch) and, in tests, an adapter
// over FakeExecutor. Torch-free on purpose.

#include <memory>
#include <optional>
#include <vector>

#include "engine/scheduler_output.h"

namespace deepinfer::engine {

// Log-probabilities of one sampled row, present when the row's request asked for them.
struct RowLogprobs {
  float logprob = 0.0f;          // of the sampled token
  std::vector<int32_t> top_ids;  // top N, by logprob descending
  std::vector<float> top_logprobs;
};

// Prompt logprobs of one prefill row (ScheduledSeq::prompt_scored): rows[i] is of the prompt
// token at position first_position + i given the tokens before it (RowLogprobs::logprob that
// token's, the top N there).
struct PromptLogprobs {
  SeqId seq_id = -1;
  int32_t epoch = 0;
  int32_t first_position = 0;
  std::vector<RowLogprobs> rows;
};

struct ExecutedStep {
  StepResult result;                                 // one token per sampled row, batch order
  std::vector<std::optional<RowLogprobs>> logprobs;  // empty, or one entry per result row
  std::vector<PromptLogprobs> prompt_logprobs;       // one per prefill row that scored its prompt
};

class PendingStep {
 public:
  virtual ~PendingStep() = default;
  // Blocks until the step's results are on the host. Called once.
  virtual ExecutedStep wait() = 0;
};

class StepExecutor {
 public:
  virtual ~StepExecutor() = default;
  // Launches step out.step. Idle steps (no sequences) need not be passed in.
  virtual std::unique_ptr<PendingStep> execute(const SchedulerOutput& out) = 0;
  // Lockstep (multi-rank jobs): a step in which this rank has nothing scheduled still joins
  // every collective of the other ranks' step, through a throwaway forward whose result is
  // discarded. Executors without collectives do nothing.
  virtual void execute_dummy() {}
};

}  // namespace deepinfer::engine
