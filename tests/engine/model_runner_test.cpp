// ModelRunner on the fast tiny model (random weights, CPU): it checks every block and slot id
// of a step against its pools, and bans the stop ids of the scheduler's EOS below min_tokens.
#include "engine/model_runner.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "engine/check.h"
#include "model/expert_parallel.h"
#include "model/random_weights.h"

namespace deepinfer::engine {
namespace {

struct TinyRunner {
  model::ModelConfig config = model::tiny_fast_test_config();
  model::ModelWeights weights = model::random_weights(config, model::WeightFormat{}, /*seed=*/1, at::kCPU);
  model::SingleRankCommunicator comm;
  ModelRunner runner{
      weights, comm, {.num_blocks = 3, .num_slots = 2, .dtype = at::kFloat, .device = at::kCPU, .model = {}, .debug_logits_path = {}}};
};

SamplingParams greedy(int32_t min_tokens = 0) {
  SamplingParams params;
  params.max_tokens = 4;
  params.temperature = 0.0f;
  params.min_tokens = min_tokens;
  return params;
}

// One prefill row of three tokens.
SchedulerOutput prefill(int64_t step, std::vector<int32_t> blocks, int32_t slot, const SamplingParams& params = greedy(),
                        int32_t eos_token_id = -1) {
  SchedulerOutput out;
  out.step = step;
  out.kind = StepKind::kPrefill;
  out.seqs.push_back(ScheduledSeq{.seq_id = 7,
                                  .num_query_tokens = 3,
                                  .start_pos = 0,
                                  .query_token_ids = {5, 6, 7},
                                  .sample = true,
                                  .epoch = 0,
                                  .output_index = 0,
                                  .block_table = std::move(blocks),
                                  .state_slot = slot,
                                  .params = std::make_shared<const SamplingParams>(params)});
  out.num_batched_tokens = 3;
  out.num_sampled = 1;
  out.eos_token_id = eos_token_id;
  return out;
}

std::string internal_error_of(const std::function<void()>& run) {
  try {
    run();
  } catch (const InternalError& error) {
    return error.what();
  }
  return "(no InternalError)";
}

TEST(ModelRunnerTest, IdsOutsideItsPoolsAreInternalErrorsNamingTheId) {
  TinyRunner t;
  EXPECT_EQ(t.runner.execute(prefill(0, {1}, 1))->wait().result.tokens.size(), 1u);
  EXPECT_NE(
      internal_error_of([&] { t.runner.execute(prefill(1, {3}, 1)); }).find("sequence 7 has block 3, the runner's pool holds blocks 1..2"),
      std::string::npos);
  EXPECT_NE(internal_error_of([&] { t.runner.execute(prefill(1, {0}, 1)); }).find("has block 0"), std::string::npos);
  EXPECT_NE(internal_error_of([&] { t.runner.execute(prefill(1, {2}, 2)); }).find("has state slot 2, the runner's pool holds slots 1..1"),
            std::string::npos);
}

TEST(ModelRunnerTest, TheSchedulersEosIsBannedBelowMinTokens) {
  TinyRunner t;
  const int32_t eos = t.runner.execute(prefill(0, {1}, 1))->wait().result.tokens.at(0).token_id;
  // The same row with that token as the step's EOS: banned while min_tokens is not reached.
  EXPECT_NE(t.runner.execute(prefill(1, {2}, 1, greedy(/*min_tokens=*/1), eos))->wait().result.tokens.at(0).token_id, eos);
  EXPECT_EQ(t.runner.execute(prefill(2, {1}, 1, greedy(/*min_tokens=*/0), eos))->wait().result.tokens.at(0).token_id, eos);
}

// The request-level token controls reach the sampler: a banned token, a large negative bias and
// an allowed list each move the greedy choice; the logprobs stay those of the raw logits.
TEST(ModelRunnerTest, LogitBiasBannedAndAllowedTokensSteerTheGreedyChoice) {
  TinyRunner t;
  SamplingParams asks = greedy();
  asks.logprobs = 3;
  const ExecutedStep free = t.runner.execute(prefill(0, {1}, 1, asks))->wait();
  const int32_t first = free.result.tokens.at(0).token_id;
  ASSERT_TRUE(free.logprobs.at(0).has_value());
  const int32_t second = free.logprobs[0]->top_ids.at(1);
  ASSERT_EQ(free.logprobs[0]->top_ids.at(0), first);

  SamplingParams banned = asks;
  banned.banned_token_ids = {first};
  const ExecutedStep without_first = t.runner.execute(prefill(1, {2}, 1, banned))->wait();
  EXPECT_EQ(without_first.result.tokens.at(0).token_id, second);
  EXPECT_EQ(without_first.logprobs.at(0)->top_ids.at(0), first) << "logprobs are of the raw logits";

  SamplingParams biased = greedy();
  biased.logit_bias = {{first, -100.0f}};
  EXPECT_EQ(t.runner.execute(prefill(2, {1}, 1, biased))->wait().result.tokens.at(0).token_id, second);

  SamplingParams allowed = greedy();
  const int32_t third = free.logprobs[0]->top_ids.at(2);
  allowed.allowed_token_ids = {third};
  EXPECT_EQ(t.runner.execute(prefill(3, {2}, 1, allowed))->wait().result.tokens.at(0).token_id, third);
}

}  // namespace
}  // namespace deepinfer::engine
