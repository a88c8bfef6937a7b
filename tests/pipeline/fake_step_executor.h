#pragma once
// A StepExecutor over engine::FakeExecutor (CPU, no model): the pipeline's tests run the
// whole job with it. on_execute runs before each step (tests use it to inject a stop).

#include <functional>
#include <memory>

#include "engine/fake_executor.h"
#include "engine/step_executor.h"

namespace deepinfer::pipeline::testing {

class FakeStepExecutor final : public engine::StepExecutor {
 public:
  explicit FakeStepExecutor(engine::FakeExecutor::Options options) : fake_(options) {}

  std::unique_ptr<engine::PendingStep> execute(const engine::SchedulerOutput& out) override {
    if (on_execute) on_execute(out);
    ++executed;
    auto result = fake_.execute(out);
    if (!result) throw std::logic_error("FakeStepExecutor needs delay_steps = 0");
    auto ready = std::make_unique<Ready>(std::move(*result));
    add_logprobs(out, ready->executed);
    add_prompt_logprobs(out, ready->executed);
    return ready;
  }

  // Made-up prompt logprobs for the rows that score their prompt (a function of the position and
  // the token scored, so a recomputed prompt gets the same values): -(token % 5) / 8 - position /
  // 4096, top N ids token, token + 1, ... falling by 0.25.
  static void add_prompt_logprobs(const engine::SchedulerOutput& out, engine::ExecutedStep& executed) {
    for (const auto& seq : out.seqs) {
      if (seq.prompt_scored <= 0) continue;
      engine::PromptLogprobs scored{.seq_id = seq.seq_id, .epoch = seq.epoch, .first_position = seq.start_pos + 1, .rows = {}};
      for (int32_t i = 0; i < seq.prompt_scored; ++i) {
        const int32_t token = i + 1 < seq.num_query_tokens ? seq.query_token_ids[i + 1] : seq.next_prompt_token;
        engine::RowLogprobs lp;
        lp.logprob = -static_cast<float>(token % 5) / 8 - static_cast<float>(seq.start_pos + 1 + i) / 4096;
        for (int32_t k = 0; k < seq.params->prompt_logprobs; ++k) {
          lp.top_ids.push_back(token + k);
          lp.top_logprobs.push_back(lp.logprob - 0.25f * static_cast<float>(k));
        }
        scored.rows.push_back(std::move(lp));
      }
      executed.prompt_logprobs.push_back(std::move(scored));
    }
  }

  // Made-up logprobs for the rows that ask (a function of the token and its output index, so
  // they survive preemption and reruns): chosen -(token % 7) / 4 - index / 1024, top N ids
  // token, token + 1, ... with logprobs falling by 0.5.
  static void add_logprobs(const engine::SchedulerOutput& out, engine::ExecutedStep& executed) {
    std::size_t row = 0;
    for (const auto& seq : out.seqs) {
      if (!seq.sample) continue;
      const int32_t token = executed.result.tokens[row].token_id;
      if (seq.params->logprobs >= 0) {
        executed.logprobs.resize(executed.result.tokens.size());
        engine::RowLogprobs lp;
        lp.logprob = -static_cast<float>(token % 7) / 4 - static_cast<float>(seq.output_index) / 1024;
        for (int32_t k = 0; k < seq.params->logprobs; ++k) {
          lp.top_ids.push_back(token + k);
          lp.top_logprobs.push_back(lp.logprob - 0.5f * static_cast<float>(k));
        }
        executed.logprobs[row] = std::move(lp);
      }
      ++row;
    }
  }

  std::function<void(const engine::SchedulerOutput&)> on_execute;
  int64_t executed = 0;

 private:
  struct Ready final : engine::PendingStep {
    explicit Ready(engine::StepResult r) : executed{std::move(r), {}, {}} {}
    engine::ExecutedStep wait() override { return std::move(executed); }
    engine::ExecutedStep executed;
  };
  engine::FakeExecutor fake_;
};

}  // namespace deepinfer::pipeline::testing
