// Scheduler::check_invariants(): the design's invariants as executable checks. Called by the
// randomized lifecycle test after every schedule() and process(); O(blocks + slots + tokens in flight).

#include <algorithm>
#include <map>
#include <utility>

#include "engine/check.h"
#include "engine/scheduler.h"

namespace deepinfer::engine {

void Scheduler::check_invariants() const {
  block_manager_.check_consistency();
  state_manager_.check_consistency();

  // In-flight reservations: unprocessed sampled rows per (sequence, epoch).
  std::map<std::pair<SeqId, int32_t>, int32_t> rows_in_flight;
  ENGINE_ASSERT(unprocessed_.size() <= 2, unprocessed_.size(), " unprocessed steps");
  for (const StepRecord& record : unprocessed_) {
    ENGINE_ASSERT(record.num_batched_tokens <= options_.max_num_batched_tokens, "step ", record.step, " has ", record.num_batched_tokens,
                  " tokens, budget ", options_.max_num_batched_tokens);
    for (const SampledToken& row : record.rows) ++rows_in_flight[{row.seq_id, row.epoch}];
  }
  const int64_t oldest_in_flight = unprocessed_.empty() ? next_step_ : unprocessed_.front().step;

  std::vector<SeqId> block_owner(block_manager_.num_blocks(), -1);
  std::vector<SeqId> slot_owner(state_manager_.num_slots(), -1);
  ENGINE_ASSERT(static_cast<int32_t>(running_.size()) <= options_.max_num_seqs, running_.size(), " running sequences, max_num_seqs ",
                options_.max_num_seqs);
  for (const Sequence* seq : running_) {
    const SeqId id = seq->id();
    ENGINE_ASSERT(seq->status() == SequenceStatus::kRunning, "seq ", id, " in running has status ", sequence_status_name(seq->status()));
    ENGINE_ASSERT(seq->state_slot() != kNoSlot && !seq->block_table().empty(), "running seq ", id, " must hold a slot and blocks (slot ",
                  seq->state_slot(), ", ", seq->block_table().size(), " blocks)");
    for (int32_t block : seq->block_table()) {
      ENGINE_ASSERT(block >= 1 && block < block_manager_.num_blocks(), "seq ", id, " holds invalid block ", block);
      ENGINE_ASSERT(block_owner[block] == -1, "block ", block, " owned by seqs ", block_owner[block], " and ", id);
      ENGINE_ASSERT(block_manager_.ref_count(block) == 1, "block ", block, " of seq ", id, " has ref count ",
                    block_manager_.ref_count(block));
      block_owner[block] = id;
    }
    const int32_t slot = seq->state_slot();
    ENGINE_ASSERT(slot >= 1 && slot < state_manager_.num_slots(), "seq ", id, " holds invalid slot ", slot);
    ENGINE_ASSERT(slot_owner[slot] == -1, "slot ", slot, " owned by seqs ", slot_owner[slot], " and ", id);
    ENGINE_ASSERT(state_manager_.in_use(slot), "slot ", slot, " of seq ", id, " is marked free");
    slot_owner[slot] = id;

    // Block table: covers the KV written, allocates nothing beyond the known/reserved tokens.
    const int64_t table_tokens = static_cast<int64_t>(seq->block_table().size()) * options_.block_size;
    const int32_t longest = std::max(seq->num_cached_tokens(), seq->num_tokens());
    ENGINE_ASSERT(table_tokens >= seq->num_cached_tokens(), "seq ", id, " cached ", seq->num_cached_tokens(), " tokens in ",
                  seq->block_table().size(), " blocks");
    const auto num_table_blocks = static_cast<int32_t>(seq->block_table().size());
    ENGINE_ASSERT(num_table_blocks == block_manager_.blocks_for_tokens(longest) ||
                      num_table_blocks == block_manager_.blocks_for_tokens(seq->num_cached_tokens()),
                  "seq ", id, " holds ", num_table_blocks, " blocks for cached=", seq->num_cached_tokens(), " tokens=", seq->num_tokens());

    // CPU/GPU views: prefilling with nothing in flight, or decode-legal.
    if (seq->is_prefilling()) {
      ENGINE_ASSERT(seq->num_inflight_tokens() == 0, "prefilling seq ", id, " has ", seq->num_inflight_tokens(), " tokens in flight");
    } else {
      ENGINE_ASSERT(seq->is_decode_legal(), "seq ", id, " is not decode-legal: cached=", seq->num_cached_tokens(),
                    " get_len()=", seq->get_len());
    }
    auto rows = rows_in_flight.find({id, seq->epoch()});
    const int32_t expected = rows == rows_in_flight.end() ? 0 : rows->second;
    ENGINE_ASSERT(seq->num_inflight_tokens() == expected, "seq ", id, " has ", seq->num_inflight_tokens(), " tokens in flight but ",
                  expected, " unprocessed rows with its epoch ", seq->epoch());
    ENGINE_ASSERT(seq->num_reserved_output_tokens() <= seq->params().max_tokens && seq->get_len() <= max_len_, "seq ", id, " grew to ",
                  seq->num_reserved_output_tokens(), " outputs / ", seq->get_len(), " tokens (max_tokens ", seq->params().max_tokens,
                  ", max_len ", max_len_, ")");
    ENGINE_ASSERT(!seq->termination_pending() || seq->last_scheduled_step() >= oldest_in_flight, "seq ", id,
                  " has a termination pending with no step in flight");
  }

  // Everything not owned is free.
  for (int32_t block = 1; block < block_manager_.num_blocks(); ++block) {
    ENGINE_ASSERT(block_owner[block] != -1 || block_manager_.ref_count(block) == 0, "block ", block,
                  " is referenced but owned by no running sequence (leak)");
  }
  for (int32_t slot = 1; slot < state_manager_.num_slots(); ++slot) {
    ENGINE_ASSERT(slot_owner[slot] != -1 || !state_manager_.in_use(slot), "slot ", slot,
                  " is in use but owned by no running sequence (leak)");
  }

  // Waiting queue: no resources; preempted sequences first, then FCFS arrivals.
  bool seen_new = false;
  SeqId last_new = -1;
  for (const Sequence* seq : waiting_) {
    const SeqId id = seq->id();
    ENGINE_ASSERT(seq->status() == SequenceStatus::kWaiting, "seq ", id, " in waiting has status ", sequence_status_name(seq->status()));
    ENGINE_ASSERT(!seq->holds_resources() && seq->num_cached_tokens() == 0 && seq->num_inflight_tokens() == 0, "waiting seq ", id,
                  " holds resources or reservations");
    ENGINE_ASSERT(seq->num_tokens() < max_len_, "waiting seq ", id, " has ", seq->num_tokens(), " tokens, max_len ", max_len_);
    ENGINE_ASSERT(!seq->termination_pending() || seq->last_scheduled_step() >= oldest_in_flight, "waiting seq ", id,
                  " has a termination pending with no step in flight");
    const bool admitted_before = seq->metrics().first_scheduled_step >= 0;
    if (admitted_before) {
      ENGINE_ASSERT(!seen_new, "preempted seq ", id, " waits behind a never-admitted sequence");
    } else {
      ENGINE_ASSERT(id > last_new, "waiting queue out of arrival order at seq ", id);
      ENGINE_ASSERT(id > max_admitted_id_, "seq ", id, " still waits but younger seq ", max_admitted_id_, " was admitted (FCFS)");
      seen_new = true;
      last_new = id;
    }
  }

  // Every sequence is in exactly the place its status says.
  size_t num_unfinished = 0;
  for (const auto& [id, seq] : seqs_) {
    if (!seq->is_finished()) {
      ++num_unfinished;
      continue;
    }
    ENGINE_ASSERT(!seq->holds_resources(), "finished seq ", id, " holds resources");
    ENGINE_ASSERT(seq->finish_reason() != FinishReason::kNone, "finished seq ", id, " has no reason");
  }
  ENGINE_ASSERT(num_unfinished == running_.size() + waiting_.size(), num_unfinished, " unfinished sequences but ", running_.size(),
                " running + ", waiting_.size(), " waiting");
}

}  // namespace deepinfer::engine
