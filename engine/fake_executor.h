#pragma once
// FakeExecutor: plays the model runner's part on the CPU so the whole request lifecycle,
// overlapped scheduling included, runs in tests. It consumes only SchedulerOutput snapshots.
// Owns a toy device: per state slot a rolling hash of the tokens fed (the "recurrent state")
// and per KV cell the token written with its writer (sequence, epoch). Every read goes through
// the block table and must hit a cell this sequence wrote in its current epoch; a slot must
// continue exactly where the same sequence left it. Violations throw InternalError.
// The sampled token is next_token(seed, prefix): a deterministic function of the request seed,
// the position and the prefix, so recomputation after preemption reproduces the same stream.

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "engine/scheduler_output.h"

namespace deepinfer::engine {

class FakeExecutor final {
 public:
  struct Options {
    int32_t block_size = 128;
    int32_t num_blocks = 0;  // same pool shape as the scheduler's
    int32_t num_slots = 0;
    int32_t vocab_size = 64;  // tokens are drawn from [0, vocab_size)
    int32_t delay_steps = 0;  // 0: execute(N) returns N's result; 1: returns N-1's (overlap)
  };

  explicit FakeExecutor(Options options);

  // Runs step out.step (steps in increasing order; idle ones may be skipped). Returns the
  // result visible now: this step's (delay 0) or the previous one's (delay 1; nullopt at first).
  std::optional<StepResult> execute(const SchedulerOutput& out);
  // The result still held back by the delay, if any.
  std::optional<StepResult> flush();
  bool has_held_result() const { return !held_.empty(); }

  // The oracle: the token a sequence with this seed samples after `prefix` (>= 1 token).
  static int32_t next_token(uint64_t seed, std::span<const int32_t> prefix, int32_t vocab_size);
  // The earlier position in [0, length) whose token the oracle mixes in: the executor fetches
  // it through the block table, so a block shared or reused by mistake is caught there.
  static int32_t probe_position(uint64_t seed, int32_t length);

 private:
  struct SlotState {
    SeqId seq_id = -1;
    int32_t epoch = 0;
    int32_t num_tokens = 0;
    uint64_t hash = 0;
  };
  struct KvCell {
    SeqId seq_id = -1;
    int32_t epoch = 0;
    int32_t token_id = 0;
  };
  struct LastSample {
    int64_t step = -1;
    int32_t epoch = 0;
    int32_t token_id = 0;
  };

  StepResult run(const SchedulerOutput& out);
  void run_row(const SchedulerOutput& out, const ScheduledSeq& row, StepResult& result);
  KvCell& cell(const ScheduledSeq& row, int32_t position);

  Options options_;
  std::vector<SlotState> slots_;  // [num_slots]
  std::vector<KvCell> kv_;        // [num_blocks * block_size]
  std::map<SeqId, LastSample> last_sample_;
  std::deque<StepResult> held_;
  int64_t next_step_ = 0;
};

}  // namespace deepinfer::engine
