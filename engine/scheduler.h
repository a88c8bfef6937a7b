#pragma once
// Scheduler: the request lifecycle and the policy of every step (design sections 3 and 5).
// Owns: all Sequences from add_request() until take_finished(), the waiting queue (FCFS,
// preempted sequences at its head), the running list, the BlockManager and StateManager,
// metrics, and the record of scheduled-but-unprocessed steps.
// Does not own: execution. An executor turns each SchedulerOutput into a StepResult; the
// scheduler never touches tensors and the executor never touches queues.
//
// Step contract (zero-overhead scheduling): schedule(N) may run before process(N-1), never
// before process(N-2). schedule() adds reservations; process() appends real tokens, checks
// stop/length and releases blocks and slot together at that commit point. A result row whose
// epoch no longer matches its sequence (preempted, finished, being terminated) is discarded.
//
// Policy: a step is prefill or decode, never both. Prefill: continue chunked prompts, then
// admit from the waiting head until the head does not fit (no skipping); blocks for the whole
// prompt and one slot are allocated together at admission; only the last chunk samples.
// Decode: every running sequence advances one token, shortest output first; when blocks run
// out the longest output is preempted (released, epoch bumped, back to the waiting head).
// Invariants are listed at check_invariants().

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/block_manager.h"
#include "engine/metrics.h"
#include "engine/scheduler_output.h"
#include "engine/sequence.h"
#include "engine/state_manager.h"

namespace deepinfer::engine {

class Scheduler final {
 public:
  struct Options {
    int32_t block_size = 128;               // tokens per KV block
    int32_t num_blocks = 0;                 // including the reserved block 0
    int32_t num_slots = 0;                  // including the reserved slot 0
    int32_t max_num_seqs = 256;             // running sequences at once
    int32_t max_num_batched_tokens = 8192;  // query tokens per step
    int32_t max_model_len = 0;              // prompt + output tokens, >= 2
    int32_t eos_token_id = -1;              // -1: none
    int32_t watermark_blocks = 0;           // admission leaves this many blocks free while others run
  };

  explicit Scheduler(Options options);

  // Takes a request. A bad request (invalid params, empty prompt, negative token id, prompt
  // that leaves no room for one output token within max_len()) is data: it finishes at once
  // with FinishReason::kError and a message, and is reported in the next output's `ignored`.
  SeqId add_request(std::string request_id, std::vector<int32_t> prompt_token_ids, SamplingParams params);

  SchedulerOutput schedule();
  // Commits the result of the oldest unprocessed step (throws InternalError if the
  // step index or its rows do not match what was scheduled) and returns the tokens appended.
  std::vector<CommittedToken> process(const StepResult& result);

  // Cancellation in the design's order: (1) wait until no unprocessed step includes the
  // sequence, (2) invalidate its epoch, (3) remove it from waiting/running, (4) release its
  // blocks and slot together, (5) finish with kAbort. Steps 2-5 run here if nothing is in
  // flight, else inside the process() that completes its last step; meanwhile it is not
  // scheduled and its results are discarded. Returns false if the sequence is unknown or finished.
  bool cancel(SeqId id);
  // The same order with another reason: kStop (a stop string found by the caller) or kError.
  // If a termination is already pending, the first reason stays.
  bool terminate(SeqId id, FinishReason reason, std::string message);

  // Finished sequences in finish order; the scheduler forgets them.
  std::vector<std::unique_ptr<Sequence>> take_finished();

  const Sequence* find(SeqId id) const;  // nullptr if unknown or already taken
  bool has_unfinished() const { return !waiting_.empty() || !running_.empty(); }
  std::vector<SeqId> unfinished_ids() const;  // running (admission order), then waiting
  const std::deque<Sequence*>& waiting() const { return waiting_; }
  const std::vector<Sequence*>& running() const { return running_; }
  int32_t num_unprocessed_steps() const { return static_cast<int32_t>(unprocessed_.size()); }
  int64_t next_step() const { return next_step_; }
  // Longest sequence (prompt + output): min(max_model_len, usable blocks * block_size).
  int32_t max_len() const { return max_len_; }
  const Options& options() const { return options_; }
  const Metrics& metrics() const { return metrics_; }
  BlockSnapshot block_snapshot() const { return block_manager_.snapshot(); }
  SlotSnapshot slot_snapshot() const { return state_manager_.snapshot(); }

  // Throws InternalError naming the sequence/block/slot if any invariant is broken:
  // - every usable block and slot is free or owned by exactly one running sequence
  //   (reference count 1); block 0 and slot 0 are never handed out;
  // - running <=> holds a slot and >= 1 block (released together); waiting/finished hold none;
  // - block tables cover the KV written and nothing beyond the tokens known or reserved;
  // - a running sequence is prefilling (nothing in flight) or decode-legal
  //   (num_cached_tokens == get_len() - 1); its in-flight count equals the unprocessed sampled
  //   rows that carry its current epoch (so no stale result was ever committed);
  // - FCFS: preempted sequences first, then never-admitted ones in arrival order, all younger
  //   than every sequence admitted so far;
  // - running <= max_num_seqs; unprocessed steps <= 2, each within the token budget;
  // - lengths stay within max_tokens and max_len().
  void check_invariants() const;

 private:
  struct StepRecord {
    int64_t step = 0;
    StepKind kind = StepKind::kIdle;
    int32_t num_batched_tokens = 0;
    std::vector<SampledToken> rows;  // seq_id and epoch of each sampled row (token unused)
  };

  // scheduler_schedule.cpp
  bool schedule_prefill(SchedulerOutput& out);
  void schedule_decode(SchedulerOutput& out);
  int32_t add_prefill_row(SchedulerOutput& out, Sequence& seq, int32_t budget);
  void add_decode_row(SchedulerOutput& out, Sequence& seq);
  void preempt(Sequence& seq, SchedulerOutput& out);
  bool will_finish_by_length(const Sequence& seq) const;

  // scheduler.cpp
  std::string admission_error(const Sequence& seq) const;
  FinishReason stop_reason(const Sequence& seq, int32_t token_id, std::string* message) const;
  void release(Sequence& seq);
  void finish_running(Sequence& seq, FinishReason reason, std::string message, int64_t step);
  void apply_ready_terminations();
  Sequence* find_mutable(SeqId id);

  Options options_;
  int32_t max_len_;
  BlockManager block_manager_;
  StateManager state_manager_;
  Metrics metrics_;

  std::map<SeqId, std::unique_ptr<Sequence>> seqs_;  // every sequence not yet taken
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;  // admission order
  std::deque<StepRecord> unprocessed_;
  std::vector<SeqId> pending_terminations_;                                 // requested, in request order
  std::vector<SeqId> finished_order_;                                       // finished, not yet taken
  std::vector<SeqId> report_ignored_, report_finished_, report_cancelled_;  // for the next output
  SeqId next_seq_id_ = 0;
  SeqId max_admitted_id_ = -1;  // highest id admitted for the first time (FCFS check)
  int64_t next_step_ = 0;
};

}  // namespace deepinfer::engine
