#include "engine/sequence.h"

#include <utility>

#include "engine/check.h"

namespace deepinfer::engine {

std::string_view sequence_status_name(SequenceStatus status) {
  switch (status) {
    case SequenceStatus::kWaiting: return "waiting";
    case SequenceStatus::kRunning: return "running";
    case SequenceStatus::kFinished: return "finished";
  }
  return "?";
}

Sequence::Sequence(SeqId id, std::string request_id, std::vector<int32_t> prompt_token_ids, std::shared_ptr<const SamplingParams> params,
                   int64_t arrival_step)
    : id_(id),
      request_id_(std::move(request_id)),
      params_(std::move(params)),
      token_ids_(std::move(prompt_token_ids)),
      num_prompt_tokens_(static_cast<int32_t>(token_ids_.size())) {
  ENGINE_ASSERT(params_ != nullptr, "sequence ", id_, " has no sampling params");
  metrics_.arrival_step = arrival_step;
}

void Sequence::admit(std::vector<int32_t> blocks, int32_t slot) {
  ENGINE_ASSERT(status_ == SequenceStatus::kWaiting, "admit seq ", id_, " in status ", sequence_status_name(status_));
  ENGINE_ASSERT(!holds_resources(), "admit seq ", id_, " that still holds blocks or a slot");
  ENGINE_ASSERT(slot != kNoSlot && slot != kPaddingSlot, "admit seq ", id_, " with slot ", slot);
  ENGINE_ASSERT(num_cached_tokens_ == 0 && num_inflight_tokens_ == 0, "admit seq ", id_, " with cached=", num_cached_tokens_,
                " inflight=", num_inflight_tokens_);
  block_table_ = std::move(blocks);
  state_slot_ = slot;
  prefill_len_ = num_tokens();
  status_ = SequenceStatus::kRunning;
}

void Sequence::append_block(int32_t block) {
  ENGINE_ASSERT(status_ == SequenceStatus::kRunning, "append_block to seq ", id_, " in status ", sequence_status_name(status_));
  block_table_.push_back(block);
}

void Sequence::reserve_prefill(int64_t step, int32_t n, bool sample) {
  ENGINE_ASSERT(status_ == SequenceStatus::kRunning, "prefill of seq ", id_, " in status ", sequence_status_name(status_));
  ENGINE_ASSERT(num_inflight_tokens_ == 0, "prefill of seq ", id_, " with ", num_inflight_tokens_, " tokens in flight");
  ENGINE_ASSERT(n >= 1 && num_cached_tokens_ + n <= prefill_len_, "prefill of ", n, " tokens for seq ", id_,
                " with cached=", num_cached_tokens_, " of ", prefill_len_);
  ENGINE_ASSERT(sample == (num_cached_tokens_ + n == prefill_len_), "seq ", id_, ": only the last prefill chunk samples (sample=", sample,
                ", chunk ends at ", num_cached_tokens_ + n, " of ", prefill_len_, ")");
  num_cached_tokens_ += n;
  if (sample) ++num_inflight_tokens_;
  last_scheduled_step_ = step;
}

void Sequence::reserve_decode(int64_t step) {
  ENGINE_ASSERT(status_ == SequenceStatus::kRunning, "decode of seq ", id_, " in status ", sequence_status_name(status_));
  ENGINE_ASSERT(!is_prefilling() && is_decode_legal(), "decode of seq ", id_, " is illegal: cached=", num_cached_tokens_,
                " get_len()=", get_len());
  ++num_cached_tokens_;
  ++num_inflight_tokens_;
  last_scheduled_step_ = step;
}

void Sequence::commit_token(int32_t token_id) {
  ENGINE_ASSERT(status_ == SequenceStatus::kRunning, "commit to seq ", id_, " in status ", sequence_status_name(status_));
  ENGINE_ASSERT(num_inflight_tokens_ >= 1, "commit to seq ", id_, " without a reservation");
  token_ids_.push_back(token_id);
  --num_inflight_tokens_;
}

Sequence::Resources Sequence::release_resources() {
  Resources resources{std::move(block_table_), state_slot_};
  block_table_.clear();
  state_slot_ = kNoSlot;
  num_cached_tokens_ = 0;
  num_inflight_tokens_ = 0;
  return resources;
}

Sequence::Resources Sequence::preempt() {
  ENGINE_ASSERT(status_ == SequenceStatus::kRunning, "preempt seq ", id_, " in status ", sequence_status_name(status_));
  Resources resources = release_resources();
  status_ = SequenceStatus::kWaiting;
  ++epoch_;
  ++metrics_.num_preemptions;
  return resources;
}

void Sequence::request_termination(FinishReason reason, std::string message) {
  ENGINE_ASSERT(status_ != SequenceStatus::kFinished, "terminate finished seq ", id_);
  ENGINE_ASSERT(reason != FinishReason::kNone, "terminate seq ", id_, " without a reason");
  if (pending_reason_ != FinishReason::kNone) return;  // the first request wins
  pending_reason_ = reason;
  pending_message_ = std::move(message);
}

void Sequence::finish(FinishReason reason, std::string message) {
  ENGINE_ASSERT(status_ != SequenceStatus::kFinished, "finish seq ", id_, " twice");
  ENGINE_ASSERT(reason != FinishReason::kNone, "finish seq ", id_, " without a reason");
  ENGINE_ASSERT(!holds_resources(), "finish seq ", id_, " before releasing its blocks and slot");
  status_ = SequenceStatus::kFinished;
  finish_reason_ = reason;
  finish_message_ = std::move(message);
  num_cached_tokens_ = 0;
  num_inflight_tokens_ = 0;
  ++epoch_;
}

}  // namespace deepinfer::engine
