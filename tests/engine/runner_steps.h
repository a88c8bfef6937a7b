#pragma once
// Hand-made steps for ModelRunner tests (CPU and CUDA): sequences 0..n-1, each with a prompt of
// kPrompt tokens (its prefill, one chunk), then one decode token a step (kPendingToken: the token
// it sampled the step before). Sequence i holds slot i + 1 and blocks i b + 1 .. i b + b for b
// blocks a sequence; every third is greedy, the rest sampled (seed 1000 + i); sequence 1 asks for
// the top 2 logprobs.

#include <cstdint>
#include <memory>

#include "engine/scheduler_output.h"

namespace deepinfer::engine::runner_steps {

inline constexpr int32_t kPrompt = 21;  // crosses the tiny window (16) and the CSA top-k (4 entries)

inline std::shared_ptr<const SamplingParams> params_of(int32_t seq) {
  SamplingParams p;
  p.max_tokens = 64;
  p.temperature = seq % 3 == 0 ? 0.0f : 0.9f;
  p.seed = 1000 + static_cast<uint64_t>(seq);
  p.logprobs = seq == 1 ? 2 : -1;
  return std::make_shared<const SamplingParams>(p);
}

inline ScheduledSeq row_of(int32_t seq, int32_t generated, int32_t blocks = 1) {
  ScheduledSeq row{.seq_id = seq,
                   .num_query_tokens = generated == 0 ? kPrompt : 1,
                   .start_pos = generated == 0 ? 0 : kPrompt + generated - 1,
                   .query_token_ids = {},
                   .sample = true,
                   .epoch = 0,
                   .output_index = generated,
                   .block_table = {},
                   .state_slot = seq + 1,
                   .params = params_of(seq)};
  for (int32_t b = 1; b <= blocks; ++b) row.block_table.push_back(seq * blocks + b);
  if (generated == 0) {
    for (int32_t i = 0; i < kPrompt; ++i) row.query_token_ids.push_back(2 + (seq * 37 + i * 11) % 500);
  } else {
    row.query_token_ids = {kPendingToken};
  }
  return row;
}

// Step `step`: sequences [0, n) having generated `generated` tokens each (0: their prefill).
inline SchedulerOutput step_of(int64_t step, int32_t n, int32_t generated, int32_t blocks = 1) {
  SchedulerOutput out;
  out.step = step;
  out.kind = generated == 0 ? StepKind::kPrefill : StepKind::kDecode;
  for (int32_t s = 0; s < n; ++s) out.seqs.push_back(row_of(s, generated, blocks));
  out.num_batched_tokens = generated == 0 ? n * kPrompt : n;
  out.num_sampled = n;
  return out;
}

}  // namespace deepinfer::engine::runner_steps
