#pragma once
// The step loop: schedule(N), execute(N), process(N-1) — the design's step contract in one
// short function. Step N runs on the executor while the host commits step N-1's tokens.
// Owns: the one step in flight. Does not own: admission, records or policy.

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "engine/scheduler.h"
#include "engine/step_executor.h"

namespace deepinfer::pipeline {

struct StepTiming {
  int64_t step = -1;
  engine::StepKind kind = engine::StepKind::kIdle;
  int32_t num_seqs = 0;
  int32_t num_batched_tokens = 0;
  int64_t context_tokens = 0;  // summed over the rows: the positions each attends up to (start + query tokens)
  double schedule_ms = 0;      // host time in schedule()
  double execute_ms = 0;       // host time in execute(): staging and launching the forward (all of it where it is synchronous, the CPU)
  double wait_ms = 0;          // host time blocked in PendingStep::wait() for this step
  double process_ms = 0;       // host time in process()
};

class StepLoop final {
 public:
  // Called for each processed step with its committed tokens (and logprobs by result row).
  using OnProcessed = std::function<void(const engine::ExecutedStep&, const std::vector<engine::CommittedToken>&, const StepTiming&)>;

  // lockstep: an idle step runs executor.execute_dummy(), so every rank of a multi-rank job
  // makes one forward per step.
  StepLoop(engine::Scheduler& scheduler, engine::StepExecutor& executor, bool overlap, OnProcessed on_processed, bool lockstep = false);

  // One iteration: schedule and launch a step, then process the previous one (or, without
  // overlap, this one). Returns the output scheduled.
  const engine::SchedulerOutput& step();
  // Processes the step still in flight, if any.
  void drain();
  bool in_flight() const { return static_cast<bool>(in_flight_); }

 private:
  struct InFlight {
    std::unique_ptr<engine::PendingStep> pending;  // null for an idle step
    StepTiming timing;
  };
  void process(InFlight& done);

  engine::Scheduler& scheduler_;
  engine::StepExecutor& executor_;
  bool overlap_;
  bool lockstep_;
  OnProcessed on_processed_;
  std::unique_ptr<InFlight> in_flight_;
  engine::SchedulerOutput last_output_;
};

}  // namespace deepinfer::pipeline
