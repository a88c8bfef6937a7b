#pragma once
// Scheduling cost, kept apart from SchedulerOutput: the output says what to run, metrics say
// what it cost. Per step: tokens by phase, preemptions, block and slot usage (watermarks).
// Per request: prefill chunks, first-token step, finish step, preemptions (on its Sequence).
// Owns only counters; never feeds back into scheduling decisions.

#include <array>
#include <cstdint>

#include "engine/types.h"

namespace deepinfer::engine {

// One request's history; step indices are -1 until the event happens.
struct RequestMetrics {
  int64_t arrival_step = 0;           // index of the next step when the request was added
  int64_t first_scheduled_step = -1;  // first step that ran any of its tokens
  int64_t first_token_step = -1;      // step whose result gave its first output token
  int64_t finish_step = -1;           // step whose result finished it; ignored/terminated: the next step index
  int32_t num_prefill_chunks = 0;     // recomputation after preemption included
  int64_t num_prefill_tokens = 0;     // recomputation included
  int32_t num_preemptions = 0;
};

// One scheduled step; usage figures are taken right after scheduling it.
struct StepMetrics {
  int64_t step = -1;
  StepKind kind = StepKind::kIdle;
  int32_t num_seqs = 0;
  int32_t num_prefill_tokens = 0;
  int32_t num_decode_tokens = 0;
  int32_t num_preempted = 0;
  int32_t num_used_blocks = 0;
  int32_t num_used_slots = 0;
  int32_t num_running = 0;
  int32_t num_waiting = 0;
};

struct MetricsTotals {
  int64_t num_steps = 0;
  int64_t num_prefill_steps = 0;
  int64_t num_decode_steps = 0;
  int64_t num_idle_steps = 0;
  int64_t num_prefill_tokens = 0;
  int64_t num_decode_tokens = 0;
  int64_t num_preemptions = 0;
  int64_t num_committed_tokens = 0;
  int64_t num_discarded_results = 0;  // stale epoch, finished or cancelling sequence
  int32_t peak_used_blocks = 0;       // high watermark over all steps
  int32_t peak_used_slots = 0;
  std::array<int64_t, 5> num_finished{};  // indexed by FinishReason

  int64_t finished(FinishReason reason) const { return num_finished[static_cast<int>(reason)]; }
};

class Metrics final {
 public:
  void record_step(const StepMetrics& step);
  void record_commit() { ++totals_.num_committed_tokens; }
  void record_discarded_result() { ++totals_.num_discarded_results; }
  void record_finish(FinishReason reason) { ++totals_.num_finished[static_cast<int>(reason)]; }

  const MetricsTotals& totals() const { return totals_; }
  // The most recent step (step == -1 before the first).
  const StepMetrics& last_step() const { return last_step_; }

 private:
  MetricsTotals totals_;
  StepMetrics last_step_;
};

}  // namespace deepinfer::engine
