#include "engine/scheduler.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "engine/check.h"

namespace deepinfer::engine {

using detail::concat;

Scheduler::Scheduler(Options options)
    : options_(options),
      max_len_(0),
      block_manager_(BlockManager::Options{.block_size = options.block_size, .num_blocks = options.num_blocks}),
      state_manager_(StateManager::Options{.num_slots = options.num_slots}) {
  ENGINE_CHECK(options_.max_num_seqs >= 1, "max_num_seqs must be >= 1, got ", options_.max_num_seqs);
  ENGINE_CHECK(options_.max_num_batched_tokens >= 1, "max_num_batched_tokens must be >= 1, got ", options_.max_num_batched_tokens);
  ENGINE_CHECK(options_.max_model_len >= 2, "max_model_len must be >= 2, got ", options_.max_model_len);
  ENGINE_CHECK(options_.eos_token_id >= -1, "eos_token_id must be >= 0 or -1 (none), got ", options_.eos_token_id);
  ENGINE_CHECK(options_.watermark_blocks >= 0 && options_.watermark_blocks < block_manager_.num_usable_blocks(),
               "watermark_blocks must be in [0, usable blocks=", block_manager_.num_usable_blocks(), "), got ", options_.watermark_blocks);
  int64_t pool_tokens = int64_t{block_manager_.num_usable_blocks()} * options_.block_size;
  max_len_ = static_cast<int32_t>(std::min<int64_t>(options_.max_model_len, pool_tokens));
}

SeqId Scheduler::add_request(std::string request_id, std::vector<int32_t> prompt_token_ids, SamplingParams params) {
  SeqId id = next_seq_id_++;
  auto shared_params = std::make_shared<const SamplingParams>(std::move(params));
  auto seq = std::make_unique<Sequence>(id, std::move(request_id), std::move(prompt_token_ids), std::move(shared_params), next_step_);
  std::string error = admission_error(*seq);
  if (error.empty()) {
    waiting_.push_back(seq.get());
  } else {
    seq->finish(FinishReason::kError, std::move(error));
    seq->metrics().finish_step = next_step_;
    metrics_.record_finish(FinishReason::kError);
    finished_order_.push_back(id);
    report_ignored_.push_back(id);
  }
  seqs_.emplace(id, std::move(seq));
  return id;
}

std::string Scheduler::admission_error(const Sequence& seq) const {
  std::string params_error = seq.params().validation_error();
  if (!params_error.empty()) return "invalid sampling params: " + params_error;
  if (seq.num_prompt_tokens() == 0) return "empty prompt";
  for (int32_t i = 0; i < seq.num_prompt_tokens(); ++i) {
    int32_t token = seq.token_ids()[i];
    if (token < 0) return concat("prompt token ", i, " is negative: ", token);
  }
  if (seq.num_prompt_tokens() + 1 > options_.max_model_len) {
    return concat("prompt of ", seq.num_prompt_tokens(), " tokens leaves no room for output within max_model_len=", options_.max_model_len);
  }
  if (seq.num_prompt_tokens() + 1 > max_len_) {
    return concat("prompt of ", seq.num_prompt_tokens(), " tokens plus one output token does not fit in the KV pool (",
                  block_manager_.num_usable_blocks(), " blocks x ", options_.block_size, " tokens)");
  }
  return {};
}

bool Scheduler::cancel(SeqId id) { return terminate(id, FinishReason::kAbort, "cancelled"); }

bool Scheduler::terminate(SeqId id, FinishReason reason, std::string message) {
  ENGINE_ASSERT(reason == FinishReason::kAbort || reason == FinishReason::kStop || reason == FinishReason::kError, "terminate(", id,
                ") with reason '", finish_reason_name(reason), "': use abort, stop or error");
  Sequence* seq = find_mutable(id);
  if (seq == nullptr || seq->is_finished()) return false;
  if (!seq->termination_pending()) {
    seq->request_termination(reason, std::move(message));
    pending_terminations_.push_back(id);
  }
  apply_ready_terminations();
  return true;
}

void Scheduler::apply_ready_terminations() {
  const int64_t oldest_in_flight = unprocessed_.empty() ? std::numeric_limits<int64_t>::max() : unprocessed_.front().step;
  std::vector<SeqId> still_pending;
  for (SeqId id : pending_terminations_) {
    Sequence* seq = find_mutable(id);
    ENGINE_ASSERT(seq != nullptr && !seq->is_finished(), "pending termination of seq ", id, " that is gone");
    // (1) A step that includes the sequence is still on the device: wait for its process().
    if (seq->last_scheduled_step() >= oldest_in_flight) {
      still_pending.push_back(id);
      continue;
    }
    // (2) The epoch is invalidated by finish() below, together with (3) and (4): nothing in
    // between can observe the sequence. (3) Remove from the queues.
    if (seq->status() == SequenceStatus::kWaiting) {
      waiting_.erase(std::find(waiting_.begin(), waiting_.end(), seq));
    } else {
      running_.erase(std::find(running_.begin(), running_.end(), seq));
    }
    // (4) Blocks and slot together. (5) The finish reason (abort for cancel()).
    release(*seq);
    FinishReason reason = seq->pending_reason();
    std::string message = seq->pending_message();
    seq->finish(reason, std::move(message));
    seq->metrics().finish_step = next_step_;
    metrics_.record_finish(reason);
    finished_order_.push_back(id);
    report_cancelled_.push_back(id);
  }
  pending_terminations_ = std::move(still_pending);
}

std::vector<CommittedToken> Scheduler::process(const StepResult& result) {
  ENGINE_ASSERT(!unprocessed_.empty(), "process(step ", result.step, ") but no step is waiting for its result");
  const StepRecord& record = unprocessed_.front();
  ENGINE_ASSERT(result.step == record.step, "process(step ", result.step, ") but the oldest unprocessed step is ", record.step);
  ENGINE_ASSERT(result.tokens.size() == record.rows.size(), "step ", result.step, " result has ", result.tokens.size(), " sampled tokens, ",
                record.rows.size(), " rows were sampled");
  for (size_t i = 0; i < record.rows.size(); ++i) {
    const SampledToken& got = result.tokens[i];
    const SampledToken& want = record.rows[i];
    ENGINE_ASSERT(got.seq_id == want.seq_id && got.epoch == want.epoch, "step ", result.step, " row ", i, " is (seq ", got.seq_id,
                  ", epoch ", got.epoch, "), scheduled was (seq ", want.seq_id, ", epoch ", want.epoch, ")");
    ENGINE_ASSERT(got.token_id >= 0, "step ", result.step, " row ", i, " (seq ", got.seq_id, ") has token id ", got.token_id,
                  ": no token could be sampled (every candidate's logit was -inf or NaN)");
  }
  unprocessed_.pop_front();

  std::vector<CommittedToken> committed;
  committed.reserve(result.tokens.size());
  for (size_t i = 0; i < result.tokens.size(); ++i) {
    const SampledToken& row = result.tokens[i];
    Sequence* seq = find_mutable(row.seq_id);
    if (seq == nullptr || seq->is_finished() || seq->termination_pending() || seq->epoch() != row.epoch) {
      metrics_.record_discarded_result();
      continue;
    }
    seq->commit_token(row.token_id);
    metrics_.record_commit();
    if (seq->metrics().first_token_step < 0) seq->metrics().first_token_step = result.step;
    std::string message;
    FinishReason reason = stop_reason(*seq, row.token_id, &message);
    committed.push_back(CommittedToken{.seq_id = row.seq_id,
                                       .result_row = static_cast<int32_t>(i),
                                       .output_index = seq->num_output_tokens() - 1,
                                       .token_id = row.token_id,
                                       .finished = reason != FinishReason::kNone});
    if (reason != FinishReason::kNone) finish_running(*seq, reason, std::move(message), result.step);
  }
  apply_ready_terminations();
  return committed;
}

FinishReason Scheduler::stop_reason(const Sequence& seq, int32_t token_id, std::string* message) const {
  const SamplingParams& params = seq.params();
  const int32_t num_outputs = seq.num_output_tokens();
  if (params.may_stop_at(num_outputs - 1)) {  // the stop rule (sampling_params.h)
    if (!params.ignore_eos && token_id == options_.eos_token_id) {
      *message = "eos";
      return FinishReason::kStop;
    }
    if (params.is_stop_token(token_id)) {
      *message = concat("stop token ", token_id);
      return FinishReason::kStop;
    }
  }
  if (num_outputs >= params.max_tokens) {
    *message = concat("max_tokens=", params.max_tokens);
    return FinishReason::kLength;
  }
  if (seq.num_tokens() >= max_len_) {
    *message = max_len_ == options_.max_model_len ? concat("max_model_len=", max_len_) : concat("KV pool capacity=", max_len_, " tokens");
    return FinishReason::kLength;
  }
  return FinishReason::kNone;
}

void Scheduler::release(Sequence& seq) {
  Sequence::Resources resources = seq.release_resources();
  block_manager_.free(resources.blocks);
  if (resources.slot != kNoSlot) state_manager_.free(resources.slot);
}

void Scheduler::finish_running(Sequence& seq, FinishReason reason, std::string message, int64_t step) {
  running_.erase(std::find(running_.begin(), running_.end(), &seq));
  release(seq);
  seq.finish(reason, std::move(message));
  seq.metrics().finish_step = step;
  metrics_.record_finish(reason);
  finished_order_.push_back(seq.id());
  report_finished_.push_back(seq.id());
}

std::vector<std::unique_ptr<Sequence>> Scheduler::take_finished() {
  std::vector<std::unique_ptr<Sequence>> taken;
  taken.reserve(finished_order_.size());
  for (SeqId id : finished_order_) {
    auto it = seqs_.find(id);
    ENGINE_ASSERT(it != seqs_.end(), "finished seq ", id, " is missing");
    taken.push_back(std::move(it->second));
    seqs_.erase(it);
  }
  finished_order_.clear();
  return taken;
}

const Sequence* Scheduler::find(SeqId id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : it->second.get();
}

Sequence* Scheduler::find_mutable(SeqId id) {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : it->second.get();
}

std::vector<SeqId> Scheduler::unfinished_ids() const {
  std::vector<SeqId> ids;
  ids.reserve(running_.size() + waiting_.size());
  for (const Sequence* seq : running_) ids.push_back(seq->id());
  for (const Sequence* seq : waiting_) ids.push_back(seq->id());
  return ids;
}

}  // namespace deepinfer::engine
