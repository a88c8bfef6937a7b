// Scheduler::schedule(): the per-step policy (design section 5). Prefill first: continue
// chunked prompts, then admit FCFS from the waiting head; if no prefill row was scheduled,
// decode every running sequence by one token, preempting the longest outputs when blocks run out.

#include <algorithm>
#include <tuple>

#include "engine/check.h"
#include "engine/scheduler.h"

namespace deepinfer::engine {

SchedulerOutput Scheduler::schedule() {
  ENGINE_ASSERT(unprocessed_.size() <= 1, "schedule() with ", unprocessed_.size(),
                " unprocessed steps: process(N-1) must run before schedule(N+1)");
  apply_ready_terminations();
  SchedulerOutput out;
  out.step = next_step_++;
  out.eos_token_id = options_.eos_token_id;
  out.ignored = std::move(report_ignored_);
  out.finished = std::move(report_finished_);
  out.cancelled = std::move(report_cancelled_);
  report_ignored_.clear();
  report_finished_.clear();
  report_cancelled_.clear();

  const bool prefill = schedule_prefill(out);
  if (!prefill) schedule_decode(out);
  out.kind = out.seqs.empty() ? StepKind::kIdle : (prefill ? StepKind::kPrefill : StepKind::kDecode);
  ENGINE_ASSERT(out.num_batched_tokens <= options_.max_num_batched_tokens, "step ", out.step, " has ", out.num_batched_tokens,
                " tokens, budget ", options_.max_num_batched_tokens);

  StepRecord record{.step = out.step, .kind = out.kind, .num_batched_tokens = out.num_batched_tokens, .rows = {}};
  for (const ScheduledSeq& row : out.seqs) {
    if (row.sample) record.rows.push_back(SampledToken{.seq_id = row.seq_id, .epoch = row.epoch, .token_id = 0});
  }
  out.num_sampled = static_cast<int32_t>(record.rows.size());
  unprocessed_.push_back(std::move(record));

  StepMetrics step{.step = out.step,
                   .kind = out.kind,
                   .num_seqs = static_cast<int32_t>(out.seqs.size()),
                   .num_prefill_tokens = prefill ? out.num_batched_tokens : 0,
                   .num_decode_tokens = prefill ? 0 : out.num_batched_tokens,
                   .num_preempted = static_cast<int32_t>(out.preempted.size()),
                   .num_used_blocks = block_manager_.num_used_blocks(),
                   .num_used_slots = state_manager_.num_used_slots(),
                   .num_running = static_cast<int32_t>(running_.size()),
                   .num_waiting = static_cast<int32_t>(waiting_.size())};
  metrics_.record_step(step);
  return out;
}

bool Scheduler::schedule_prefill(SchedulerOutput& out) {
  int32_t budget = options_.max_num_batched_tokens;
  // Prompts already admitted continue first, in admission order: they hold all their blocks.
  for (Sequence* seq : running_) {
    if (budget == 0) break;
    if (seq->is_prefilling() && !seq->termination_pending()) budget -= add_prefill_row(out, *seq, budget);
  }
  // FCFS admission: stop at the first sequence that does not fit. A sequence waiting for its
  // termination to be applied is not served, so it is stepped over, not waited for.
  for (size_t i = 0; i < waiting_.size() && budget > 0;) {
    Sequence* seq = waiting_[i];
    if (seq->termination_pending()) {
      ++i;
      continue;
    }
    if (static_cast<int32_t>(running_.size()) >= options_.max_num_seqs) break;
    const int32_t need = block_manager_.blocks_for_tokens(seq->num_tokens());
    const int32_t keep_free = running_.empty() ? 0 : options_.watermark_blocks;
    if (!state_manager_.can_allocate() || block_manager_.num_free_blocks() < need + keep_free) break;
    waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));
    // Blocks for the whole prompt and one state slot, allocated together.
    std::vector<int32_t> blocks = block_manager_.allocate(need);
    seq->admit(std::move(blocks), state_manager_.allocate());
    if (seq->metrics().first_scheduled_step < 0) max_admitted_id_ = std::max(max_admitted_id_, seq->id());
    running_.push_back(seq);
    budget -= add_prefill_row(out, *seq, budget);
  }
  return !out.seqs.empty();
}

int32_t Scheduler::add_prefill_row(SchedulerOutput& out, Sequence& seq, int32_t budget) {
  const int32_t start = seq.num_cached_tokens();
  const int32_t n = std::min(seq.num_tokens() - start, budget);
  const bool sample = start + n == seq.num_tokens();
  ENGINE_ASSERT(static_cast<int64_t>(seq.block_table().size()) * options_.block_size >= start + n, "seq ", seq.id(),
                " prefill to position ", start + n, " with only ", seq.block_table().size(), " blocks");
  seq.reserve_prefill(out.step, n, sample);

  ScheduledSeq row;
  row.seq_id = seq.id();
  row.num_query_tokens = n;
  row.start_pos = start;
  row.query_token_ids.assign(seq.token_ids().begin() + start, seq.token_ids().begin() + start + n);
  row.sample = sample;
  row.epoch = seq.epoch();
  row.output_index = sample ? seq.get_len() - 1 - seq.num_prompt_tokens() : 0;
  row.block_table = seq.block_table();
  row.state_slot = seq.state_slot();
  row.params = seq.shared_params();
  if (row.params->prompt_logprobs >= 0) {  // rows at positions p with a prompt token at p + 1
    row.prompt_scored = std::clamp(seq.num_prompt_tokens() - 1 - start, 0, n);
    if (row.prompt_scored == n && start + n < seq.num_prompt_tokens()) row.next_prompt_token = seq.token_ids()[start + n];
  }
  out.seqs.push_back(std::move(row));
  out.num_batched_tokens += n;

  RequestMetrics& metrics = seq.metrics();
  if (metrics.first_scheduled_step < 0) metrics.first_scheduled_step = out.step;
  ++metrics.num_prefill_chunks;
  metrics.num_prefill_tokens += n;
  return n;
}

bool Scheduler::will_finish_by_length(const Sequence& seq) const {
  return seq.num_inflight_tokens() > 0 && (seq.num_reserved_output_tokens() >= seq.params().max_tokens || seq.get_len() >= max_len_);
}

void Scheduler::schedule_decode(SchedulerOutput& out) {
  // Sequences about to hand their blocks back: a finish already in flight, or a termination
  // waiting for its step. They are neither scheduled nor preempted.
  bool release_coming = false;
  std::vector<Sequence*> candidates;
  candidates.reserve(running_.size());
  for (Sequence* seq : running_) {
    if (seq->termination_pending() || will_finish_by_length(*seq)) {
      release_coming = true;
    } else if (!seq->is_prefilling()) {
      candidates.push_back(seq);
    }
  }
  // Shortest output first (ties: arrival order); preemption victims come from the tail.
  std::sort(candidates.begin(), candidates.end(), [](const Sequence* a, const Sequence* b) {
    return std::make_tuple(a->num_reserved_output_tokens(), a->id()) < std::make_tuple(b->num_reserved_output_tokens(), b->id());
  });

  std::vector<Sequence*> preempted;
  size_t end = candidates.size();  // candidates[i, end) are unscheduled and still running
  int32_t budget = options_.max_num_batched_tokens;
  for (size_t i = 0; i < end && budget > 0; ++i) {
    Sequence* seq = candidates[i];
    const int32_t position = seq->num_cached_tokens();  // KV written by this decode row
    const auto needed_blocks = static_cast<size_t>(position / options_.block_size) + 1;
    ENGINE_ASSERT(seq->block_table().size() + 1 >= needed_blocks, "seq ", seq->id(), " at position ", position, " has only ",
                  seq->block_table().size(), " blocks");
    if (seq->block_table().size() < needed_blocks) {
      while (!block_manager_.can_allocate(1) && end > i + 1) {
        preempted.push_back(candidates[--end]);
        preempt(*preempted.back(), out);
      }
      if (!block_manager_.can_allocate(1)) {
        if (release_coming) continue;  // wait: a finishing sequence frees blocks at its commit
        preempted.push_back(seq);
        preempt(*seq, out);
        end = i;
        break;
      }
      seq->append_block(block_manager_.allocate(1).front());
    }
    add_decode_row(out, *seq);
    --budget;
  }
  // Preempted sequences go back to the head of the waiting queue, in arrival order.
  std::sort(preempted.begin(), preempted.end(), [](const Sequence* a, const Sequence* b) { return a->id() < b->id(); });
  waiting_.insert(waiting_.begin(), preempted.begin(), preempted.end());
}

void Scheduler::add_decode_row(SchedulerOutput& out, Sequence& seq) {
  const int32_t position = seq.num_cached_tokens();
  int32_t token = kPendingToken;
  if (position < seq.num_tokens()) {
    token = seq.token_ids()[position];
  } else {
    ENGINE_ASSERT(seq.last_scheduled_step() == out.step - 1, "seq ", seq.id(), " decodes a pending token from step ",
                  seq.last_scheduled_step(), " in step ", out.step);
  }
  seq.reserve_decode(out.step);

  ScheduledSeq row;
  row.seq_id = seq.id();
  row.num_query_tokens = 1;
  row.start_pos = position;
  row.query_token_ids = {token};
  row.sample = true;
  row.epoch = seq.epoch();
  row.output_index = seq.get_len() - 1 - seq.num_prompt_tokens();
  row.block_table = seq.block_table();
  row.state_slot = seq.state_slot();
  row.params = seq.shared_params();
  out.seqs.push_back(std::move(row));
  out.num_batched_tokens += 1;
}

void Scheduler::preempt(Sequence& seq, SchedulerOutput& out) {
  running_.erase(std::find(running_.begin(), running_.end(), &seq));
  Sequence::Resources resources = seq.preempt();  // epoch bumped: results in flight are stale
  block_manager_.free(resources.blocks);          // blocks and slot together
  state_manager_.free(resources.slot);
  out.preempted.push_back(seq.id());
}

}  // namespace deepinfer::engine
