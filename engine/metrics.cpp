#include "engine/metrics.h"

#include <algorithm>

namespace deepinfer::engine {

void Metrics::record_step(const StepMetrics& step) {
  last_step_ = step;
  ++totals_.num_steps;
  switch (step.kind) {
    case StepKind::kIdle: ++totals_.num_idle_steps; break;
    case StepKind::kPrefill: ++totals_.num_prefill_steps; break;
    case StepKind::kDecode: ++totals_.num_decode_steps; break;
  }
  totals_.num_prefill_tokens += step.num_prefill_tokens;
  totals_.num_decode_tokens += step.num_decode_tokens;
  totals_.num_preemptions += step.num_preempted;
  totals_.peak_used_blocks = std::max(totals_.peak_used_blocks, step.num_used_blocks);
  totals_.peak_used_slots = std::max(totals_.peak_used_slots, step.num_used_slots);
}

}  // namespace deepinfer::engine
