#pragma once
// Helpers for the engine core tests: a step loop over Scheduler + FakeExecutor, and an oracle
// that computes each request's expected tokens and finish reason without the scheduler.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/fake_executor.h"
#include "engine/scheduler.h"

namespace deepinfer::engine::testing {

inline FakeExecutor make_executor(const Scheduler::Options& options, int32_t vocab_size, bool overlap) {
  return FakeExecutor(FakeExecutor::Options{.block_size = options.block_size,
                                            .num_blocks = options.num_blocks,
                                            .num_slots = options.num_slots,
                                            .vocab_size = vocab_size,
                                            .delay_steps = overlap ? 1 : 0});
}

struct Expected {
  std::vector<int32_t> outputs;
  FinishReason reason = FinishReason::kNone;
};

// What a request produces when nothing interferes: the oracle stream cut by the stop rules
// (EOS unless ignore_eos, stop tokens once min_tokens precede them, max_tokens, max_len).
inline Expected expected_run(const std::vector<int32_t>& prompt, const SamplingParams& params, int32_t eos_token_id, int32_t max_len,
                             int32_t vocab_size) {
  Expected expected;
  std::vector<int32_t> tokens = prompt;
  while (true) {
    const int32_t token = FakeExecutor::next_token(params.seed, tokens, vocab_size);
    tokens.push_back(token);
    expected.outputs.push_back(token);
    const auto n = static_cast<int32_t>(expected.outputs.size());
    if (n > params.min_tokens && ((!params.ignore_eos && token == eos_token_id) || params.is_stop_token(token))) {
      expected.reason = FinishReason::kStop;
      return expected;
    }
    if (n >= params.max_tokens || static_cast<int32_t>(tokens.size()) >= max_len) {
      expected.reason = FinishReason::kLength;
      return expected;
    }
  }
}

// Runs schedule/execute/process until every request has finished. With overlap the executor
// holds each result one step, so process(N-1) runs after schedule(N). Checks the invariants
// after every call when asked. Returns finished sequences by id.
inline std::map<SeqId, std::unique_ptr<Sequence>> run_to_completion(Scheduler& scheduler, FakeExecutor& executor, bool check,
                                                                    int64_t max_steps = 1'000'000) {
  std::map<SeqId, std::unique_ptr<Sequence>> finished;
  auto collect = [&] {
    for (auto& seq : scheduler.take_finished()) finished.emplace(seq->id(), std::move(seq));
  };
  int64_t steps = 0;
  while (scheduler.has_unfinished()) {
    if (++steps > max_steps) throw std::logic_error("no progress after " + std::to_string(max_steps) + " steps");
    SchedulerOutput out = scheduler.schedule();
    if (check) scheduler.check_invariants();
    if (auto result = executor.execute(out)) {
      scheduler.process(*result);
      if (check) scheduler.check_invariants();
    }
    collect();
  }
  while (auto result = executor.flush()) scheduler.process(*result);
  if (check) scheduler.check_invariants();
  collect();
  return finished;
}

}  // namespace deepinfer::engine::testing
