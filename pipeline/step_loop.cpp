#include "pipeline/step_loop.h"

#include "engine/check.h"

namespace deepinfer::pipeline {
namespace {

double elapsed_ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since).count();
}

int64_t context_tokens(const engine::SchedulerOutput& out) {
  int64_t sum = 0;
  for (const engine::ScheduledSeq& row : out.seqs) sum += row.start_pos + row.num_query_tokens;
  return sum;
}

}  // namespace

StepLoop::StepLoop(engine::Scheduler& scheduler, engine::StepExecutor& executor, bool overlap, OnProcessed on_processed, bool lockstep)
    : scheduler_(scheduler), executor_(executor), overlap_(overlap), lockstep_(lockstep), on_processed_(std::move(on_processed)) {}

const engine::SchedulerOutput& StepLoop::step() {
  auto start = std::chrono::steady_clock::now();
  last_output_ = scheduler_.schedule();  // schedule(N)
  auto launched = std::make_unique<InFlight>();
  launched->timing = StepTiming{.step = last_output_.step,
                                .kind = last_output_.kind,
                                .num_seqs = static_cast<int32_t>(last_output_.seqs.size()),
                                .num_batched_tokens = last_output_.num_batched_tokens,
                                .context_tokens = context_tokens(last_output_),
                                .schedule_ms = elapsed_ms(start)};
  start = std::chrono::steady_clock::now();
  if (!last_output_.empty())
    launched->pending = executor_.execute(last_output_);  // execute(N)
  else if (lockstep_)
    executor_.execute_dummy();  // join the other ranks' step N
  launched->timing.execute_ms = elapsed_ms(start);
  if (in_flight_) process(*in_flight_);  // process(N-1)
  in_flight_ = std::move(launched);
  if (!overlap_) drain();
  return last_output_;
}

void StepLoop::drain() {
  if (!in_flight_) return;
  auto done = std::move(in_flight_);
  process(*done);
}

void StepLoop::process(InFlight& done) {
  StepTiming& timing = done.timing;
  auto start = std::chrono::steady_clock::now();
  engine::ExecutedStep executed;
  if (done.pending) {
    executed = done.pending->wait();
    ENGINE_ASSERT(executed.result.step == timing.step, "executor returned step ", executed.result.step, " for step ", timing.step);
  } else {
    executed.result.step = timing.step;
  }
  timing.wait_ms = elapsed_ms(start);
  start = std::chrono::steady_clock::now();
  const auto committed = scheduler_.process(executed.result);
  timing.process_ms = elapsed_ms(start);
  on_processed_(executed, committed, timing);
}

}  // namespace deepinfer::pipeline
