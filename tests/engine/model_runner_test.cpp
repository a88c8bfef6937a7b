// ModelRunner on the fast tiny model (random weights, CPU): it checks every block and slot id
// of a step against its pools, bans the stop ids of the scheduler's EOS below min_tokens, steers
// the sampler with the request's token controls, and scores prompts.
#include "engine/model_runner.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "engine/check.h"
#include "model/deepseek_v4_model.h"
#include "model/expert_parallel.h"
#include "model/model_cache.h"
#include "model/random_weights.h"
#include "tests/engine/runner_steps.h"

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

// A row with no candidate (every token banned; admission refuses such requests, so only NaN
// logits could do it) reaches the host as -1, and the next step, whose pending token it is,
// runs on token 0 instead of reading the embedding out of range.
TEST(ModelRunnerTest, ARowWithoutACandidateIsMinusOneAndTheNextStepStillRuns) {
  TinyRunner t;
  SamplingParams none = greedy();
  for (int32_t id = 0; id < t.config.vocab_size; ++id) none.banned_token_ids.push_back(id);
  EXPECT_EQ(t.runner.execute(prefill(0, {1}, 1, none))->wait().result.tokens.at(0).token_id, -1);
  SchedulerOutput next = prefill(1, {1}, 1);
  next.kind = StepKind::kDecode;
  next.seqs[0].num_query_tokens = 1;
  next.seqs[0].start_pos = 3;
  next.seqs[0].query_token_ids = {kPendingToken};
  next.seqs[0].output_index = 1;
  next.num_batched_tokens = 1;
  EXPECT_EQ(t.runner.execute(next)->wait().result.tokens.size(), 1u);
}

// The prompt's logprobs from the model's logits at every prompt row (one forward, all rows
// sampled), float64 log-softmax: position p + 1's from row p.
std::vector<double> reference_prompt_logprobs(TinyRunner& t, const std::vector<int32_t>& prompt) {
  model::DeepseekV4Model model(t.weights, t.comm, {});
  model::ModelCache cache(t.config, {.num_blocks = 3, .num_slots = 2, .dtype = at::kFloat, .device = at::kCPU});
  model::BatchInput input;
  input.tokens = {std::vector<int64_t>(prompt.begin(), prompt.end())};
  input.start_positions = {0};
  input.block_tables = {{1}};
  input.state_slots = {1};
  for (std::size_t i = 0; i < prompt.size(); ++i) input.sample_rows.push_back(static_cast<int64_t>(i));
  const at::Tensor logprobs = model.forward(model::ForwardBatch::build(input, at::kCPU), cache).to(at::kDouble).log_softmax(1);
  std::vector<double> out;
  for (std::size_t p = 1; p < prompt.size(); ++p) out.push_back(logprobs[static_cast<int64_t>(p) - 1][prompt[p]].item<double>());
  return out;
}

// Prompt logprobs: one chunk, or two with the first naming the token after it; each matches the
// model's own log-softmax at that row, the top N holds the best ids in order, and asking for them
// changes neither the sampled token nor its logprob by a bit.
TEST(ModelRunnerTest, PromptLogprobsMatchTheLogSoftmaxOfEachPromptRow) {
  const std::vector<int32_t> prompt = {5, 6, 7};
  TinyRunner reference_model;
  const std::vector<double> expected = reference_prompt_logprobs(reference_model, prompt);

  SamplingParams asks = greedy();
  asks.logprobs = 1;
  asks.prompt_logprobs = 2;
  SchedulerOutput one = prefill(0, {1}, 1, asks);
  one.seqs[0].prompt_scored = 2;  // rows 0 and 1 score tokens 6 and 7
  TinyRunner a;
  const ExecutedStep scored = a.runner.execute(one)->wait();
  ASSERT_EQ(scored.prompt_logprobs.size(), 1u);
  const PromptLogprobs& got = scored.prompt_logprobs[0];
  EXPECT_EQ(got.seq_id, 7);
  EXPECT_EQ(got.first_position, 1);
  ASSERT_EQ(got.rows.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_NEAR(got.rows[i].logprob, expected[i], 1e-5) << "position " << i + 1;
    ASSERT_EQ(got.rows[i].top_ids.size(), 2u);
    EXPECT_GE(got.rows[i].top_logprobs[0], got.rows[i].top_logprobs[1]);
    EXPECT_GE(got.rows[i].top_logprobs[0], got.rows[i].logprob);
  }

  SamplingParams plain = greedy();
  plain.logprobs = 1;
  TinyRunner b;
  const ExecutedStep unscored = b.runner.execute(prefill(0, {1}, 1, plain))->wait();
  EXPECT_TRUE(unscored.prompt_logprobs.empty());
  EXPECT_EQ(unscored.result.tokens.at(0).token_id, scored.result.tokens.at(0).token_id);
  EXPECT_EQ(unscored.logprobs.at(0)->logprob, scored.logprobs.at(0)->logprob) << "the sampled row is computed apart";

  // Two chunks: [5, 6] scores 6 and, by next_prompt_token, 7; then [7] samples.
  TinyRunner c;
  SchedulerOutput first = prefill(0, {1}, 1, asks);
  first.seqs[0].num_query_tokens = 2;
  first.seqs[0].query_token_ids = {5, 6};
  first.seqs[0].sample = false;
  first.seqs[0].prompt_scored = 2;
  first.seqs[0].next_prompt_token = 7;
  first.num_batched_tokens = 2;
  first.num_sampled = 0;
  const ExecutedStep chunk = c.runner.execute(first)->wait();
  ASSERT_EQ(chunk.prompt_logprobs.size(), 1u);
  ASSERT_EQ(chunk.prompt_logprobs[0].rows.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i)
    EXPECT_NEAR(chunk.prompt_logprobs[0].rows[i].logprob, expected[i], 1e-4) << "chunked, position " << i + 1;
}

// The CUDA padding of decode steps (decode_graphs.h), run on the CPU: 5 sequences padded to the
// bucket of 8 with rows on block 0 / slot 0, block tables widened from 2 to the bucket of 2 with
// static shapes (every CSA entry of the tables' capacity scored). The padding rows are inert: the
// real rows' tokens and logprobs are those of the same steps unpadded.
TEST(ModelRunnerTest, PaddedDecodeStepsGiveTheTokensOfUnpaddedOnes) {
  const model::ModelConfig config = model::tiny_fast_test_config();
  const model::ModelWeights weights = model::random_weights(config, model::WeightFormat{}, /*seed=*/4, at::kCPU);
  model::SingleRankCommunicator comm;
  ModelRunner::Options options{.num_blocks = 16, .num_slots = 9, .dtype = at::kFloat, .device = at::kCPU, .model = {}};
  ModelRunner plain(weights, comm, options);
  options.pad_decode_on_cpu = true;
  ModelRunner padded(weights, comm, options);
  for (int32_t g = 0; g <= 12; ++g) {
    const SchedulerOutput out = runner_steps::step_of(g, 5, g, /*blocks=*/2);
    const ExecutedStep a = plain.execute(out)->wait();
    const ExecutedStep b = padded.execute(out)->wait();
    ASSERT_EQ(b.result.tokens.size(), 5u) << "the padding rows' samples are dropped";
    for (std::size_t i = 0; i < 5; ++i) {
      EXPECT_EQ(a.result.tokens[i].seq_id, b.result.tokens[i].seq_id);
      EXPECT_EQ(a.result.tokens[i].token_id, b.result.tokens[i].token_id) << "step " << g << " row " << i;
    }
    ASSERT_TRUE(a.logprobs.at(1).has_value() && b.logprobs.at(1).has_value());
    EXPECT_NEAR(a.logprobs[1]->logprob, b.logprobs[1]->logprob, 1e-4) << "step " << g;
    EXPECT_EQ(a.logprobs[1]->top_ids, b.logprobs[1]->top_ids) << "step " << g;
  }
  EXPECT_EQ(padded.graph_stats().replayed, 0) << "no graphs on the CPU";
}

}  // namespace
}  // namespace deepinfer::engine
