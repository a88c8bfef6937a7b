#pragma once
// The data contract of one step (design section 3):
//   schedule(N) -> SchedulerOutput   execute(N) -> StepResult   process(StepResult of N-1 or N)
// SchedulerOutput is a complete snapshot: an executor builds its batch from it alone and never
// re-derives policy or reads scheduler queues. StepResult carries one sampled token per
// sampled row, tagged with the epoch it was scheduled under.

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/sampling_params.h"
#include "engine/types.h"

namespace deepinfer::engine {

// One sequence's row of the batch.
struct ScheduledSeq {
  SeqId seq_id = -1;
  int32_t num_query_tokens = 0;  // prefill: the chunk length; decode: 1
  // Position of the first query token = num_cached_tokens before this step; the query tokens
  // sit at positions [start_pos, start_pos + num_query_tokens). start_pos == 0 means the
  // sequence's state slot must be treated as fresh (new or recomputed sequence).
  int32_t start_pos = 0;
  // [num_query_tokens]. Prefill: known prompt/recompute tokens. Decode: the last token, or
  // kPendingToken when it is the token this sequence sampled in step - 1 (still on the device).
  std::vector<int32_t> query_token_ids;
  bool sample = false;       // this row produces a token (last prefill chunk, every decode row)
  int32_t epoch = 0;         // the sequence's epoch now; the result row must carry it back
  int32_t output_index = 0;  // index in the output stream of the token sampled (if sample)
  // Covers positions [0, start_pos + num_query_tokens): blocks for the whole prompt are
  // allocated at admission, decode adds one when a block fills.
  std::vector<int32_t> block_table;
  int32_t state_slot = kNoSlot;
  std::shared_ptr<const SamplingParams> params;  // for the sampler (seed, temperature, ...)
  // Prompt logprobs (params->prompt_logprobs >= 0, prefill rows): the first `prompt_scored` query
  // rows are scored against the prompt token after each, query row i + 1's, or next_prompt_token
  // for the chunk's last row (the first token of the next chunk; -1 when none is scored).
  int32_t prompt_scored = 0;
  int32_t next_prompt_token = -1;
};

struct SchedulerOutput {
  int64_t step = 0;
  StepKind kind = StepKind::kIdle;
  std::vector<ScheduledSeq> seqs;  // batch order
  int32_t num_batched_tokens = 0;  // sum of num_query_tokens, <= max_num_batched_tokens
  int32_t num_sampled = 0;         // rows with sample == true
  // The EOS id of the stop rule (Scheduler::Options::eos_token_id; -1: none): the sampler bans
  // the rows' stop ids (SamplingParams::stop_ids) while the rule does not let them stop.
  int32_t eos_token_id = -1;
  // Since the previous schedule(): rejected at admission (finish reason error), finished at a
  // commit point (stop, length), preempted by this schedule() (back to waiting, epoch bumped),
  // terminated through the cancellation order (abort, or an external stop).
  std::vector<SeqId> ignored;
  std::vector<SeqId> finished;
  std::vector<SeqId> preempted;
  std::vector<SeqId> cancelled;

  // Nothing to run (kind kIdle): the executor may skip the model, but the step still gets an
  // (empty) StepResult so that process() sees every step in order.
  bool empty() const { return seqs.empty(); }
};

struct SampledToken {
  SeqId seq_id = -1;
  int32_t epoch = 0;  // copied from the ScheduledSeq row
  int32_t token_id = 0;
};

// What executing step `step` produced: one entry per sampled row, in batch order.
struct StepResult {
  int64_t step = 0;
  std::vector<SampledToken> tokens;
};

// A token that process() appended to its sequence.
struct CommittedToken {
  SeqId seq_id = -1;
  int32_t result_row = 0;    // index into StepResult::tokens (for logprobs kept by the caller)
  int32_t output_index = 0;  // position in the sequence's output stream
  int32_t token_id = 0;
  bool finished = false;  // this token finished the sequence (stop or length)
};

}  // namespace deepinfer::engine
