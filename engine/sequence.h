#pragma once
// Sequence: one request's state inside the engine: its tokens, status, finish reason, epoch,
// resources (block ids, state slot) and the two views of its length.
//   CPU view:   num_tokens() = len(token_ids): prompt + committed outputs
//   GPU view:   get_len() = num_tokens() + num_inflight_tokens (sampled, not yet committed)
//   KV view:    num_cached_tokens: positions whose KV/state is written or scheduled to be
// Decode is legal only when num_cached_tokens == get_len() - 1.
// Owns: the legality of each transition (each method checks it and throws InternalError).
// Does not own: policy (when to admit, preempt or finish: the Scheduler) or the pools the
// block and slot ids come from (BlockManager, StateManager).

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/metrics.h"
#include "engine/sampling_params.h"
#include "engine/types.h"

namespace deepinfer::engine {

enum class SequenceStatus { kWaiting, kRunning, kFinished };

class Sequence final {
 public:
  struct Resources {
    std::vector<int32_t> blocks;
    int32_t slot = kNoSlot;
  };

  Sequence(SeqId id, std::string request_id, std::vector<int32_t> prompt_token_ids, std::shared_ptr<const SamplingParams> params,
           int64_t arrival_step);

  SeqId id() const { return id_; }
  const std::string& request_id() const { return request_id_; }
  const SamplingParams& params() const { return *params_; }
  const std::shared_ptr<const SamplingParams>& shared_params() const { return params_; }

  std::span<const int32_t> token_ids() const { return token_ids_; }
  std::span<const int32_t> prompt_token_ids() const { return std::span(token_ids_).first(num_prompt_tokens_); }
  std::span<const int32_t> output_token_ids() const { return std::span(token_ids_).subspan(num_prompt_tokens_); }
  int32_t num_prompt_tokens() const { return num_prompt_tokens_; }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_tokens_; }
  int32_t num_tokens() const { return static_cast<int32_t>(token_ids_.size()); }

  SequenceStatus status() const { return status_; }
  bool is_finished() const { return status_ == SequenceStatus::kFinished; }
  FinishReason finish_reason() const { return finish_reason_; }
  const std::string& finish_message() const { return finish_message_; }
  // Incremented by preemption and by finishing: a sampled result carrying an older epoch is stale.
  int32_t epoch() const { return epoch_; }

  const std::vector<int32_t>& block_table() const { return block_table_; }
  int32_t state_slot() const { return state_slot_; }
  bool holds_resources() const { return state_slot_ != kNoSlot || !block_table_.empty(); }

  int32_t num_inflight_tokens() const { return num_inflight_tokens_; }
  int32_t num_cached_tokens() const { return num_cached_tokens_; }
  int32_t get_len() const { return num_tokens() + num_inflight_tokens_; }
  // Output length in the GPU view (committed + in flight): the decode ordering key.
  int32_t num_reserved_output_tokens() const { return get_len() - num_prompt_tokens_; }
  bool is_decode_legal() const { return num_cached_tokens_ == get_len() - 1; }
  // Running and still feeding the tokens it was admitted with (prompt, or prompt + outputs
  // when recomputed). Decode-phase sequences also have num_cached_tokens < num_tokens()
  // between a commit and the next decode, so the phase is kept explicitly.
  bool is_prefilling() const { return status_ == SequenceStatus::kRunning && num_cached_tokens_ < prefill_len_; }

  // Termination asked for (cancel or external stop) and waiting for its in-flight steps.
  bool termination_pending() const { return pending_reason_ != FinishReason::kNone; }
  FinishReason pending_reason() const { return pending_reason_; }
  const std::string& pending_message() const { return pending_message_; }
  // Last step that ran any token of this sequence (-1: none).
  int64_t last_scheduled_step() const { return last_scheduled_step_; }

  RequestMetrics& metrics() { return metrics_; }
  const RequestMetrics& metrics() const { return metrics_; }

  // --- Transitions, called by the Scheduler. Each throws InternalError if illegal. ---
  // waiting -> running with the blocks for all num_tokens() and one state slot.
  void admit(std::vector<int32_t> blocks, int32_t slot);
  void append_block(int32_t block);
  // Schedules the next n tokens of token_ids at step; sample: this chunk ends the known
  // tokens and reserves the next one.
  void reserve_prefill(int64_t step, int32_t n, bool sample);
  // Schedules one decode token (the last of the GPU view) and reserves the next one.
  void reserve_decode(int64_t step);
  // Appends a sampled token; consumes one reservation.
  void commit_token(int32_t token_id);
  // running -> waiting: hands back blocks and slot (the caller frees both), forgets every
  // reservation and bumps the epoch so results in flight are stale.
  Resources preempt();
  // Hands back blocks and slot of a running sequence that is about to finish.
  Resources release_resources();
  void request_termination(FinishReason reason, std::string message);
  // Terminal: requires resources already released; bumps the epoch.
  void finish(FinishReason reason, std::string message);

 private:
  SeqId id_;
  std::string request_id_;
  std::shared_ptr<const SamplingParams> params_;
  std::vector<int32_t> token_ids_;
  int32_t num_prompt_tokens_;
  SequenceStatus status_ = SequenceStatus::kWaiting;
  FinishReason finish_reason_ = FinishReason::kNone;
  std::string finish_message_;
  int32_t epoch_ = 0;
  std::vector<int32_t> block_table_;
  int32_t state_slot_ = kNoSlot;
  int32_t num_inflight_tokens_ = 0;
  int32_t num_cached_tokens_ = 0;
  int32_t prefill_len_ = 0;  // num_tokens() at admission
  FinishReason pending_reason_ = FinishReason::kNone;
  std::string pending_message_;
  int64_t last_scheduled_step_ = -1;
  RequestMetrics metrics_;
};

std::string_view sequence_status_name(SequenceStatus status);  // "waiting", "running", "finished"

}  // namespace deepinfer::engine
