// Preemption under a small pool: every request still finishes, and the preempted (recomputed)
// requests produce exactly the token streams of a run with a pool large enough to never preempt.
// The fake executor's token is a function of (request seed, position, prefix) only.

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "tests/engine/engine_core_test_util.h"

namespace deepinfer::engine {
namespace {

using testing::make_executor;
using testing::run_to_completion;

constexpr int32_t kVocab = 40;

struct RunSummary {
  std::map<std::string, std::vector<int32_t>> outputs;  // by request id
  std::map<std::string, FinishReason> reasons;
  int64_t preemptions = 0;
  int32_t preempted_requests = 0;
  int64_t recomputed_tokens = 0;
  int32_t peak_blocks = 0;
};

RunSummary run(int32_t num_blocks, bool overlap, bool ignore_eos) {
  Scheduler::Options options{.block_size = 4,
                             .num_blocks = num_blocks,
                             .num_slots = 9,
                             .max_num_seqs = 8,
                             .max_num_batched_tokens = 32,
                             .max_model_len = 256,
                             .eos_token_id = 0,
                             .watermark_blocks = 0};
  Scheduler scheduler(options);
  FakeExecutor executor = make_executor(options, kVocab, overlap);
  for (int32_t i = 0; i < 16; ++i) {
    std::vector<int32_t> prompt;
    for (int32_t t = 0; t < 5 + (i * 7) % 17; ++t) prompt.push_back(1 + (i * 31 + t * 17) % (kVocab - 1));
    SamplingParams params;
    params.max_tokens = 20 + (i * 13) % 25;
    params.seed = 1000 + i;
    params.ignore_eos = ignore_eos;
    scheduler.add_request("req-" + std::to_string(i), prompt, params);
  }
  auto finished = run_to_completion(scheduler, executor, /*check=*/true);
  RunSummary result;
  for (const auto& [id, seq] : finished) {
    result.outputs[seq->request_id()].assign(seq->output_token_ids().begin(), seq->output_token_ids().end());
    result.reasons[seq->request_id()] = seq->finish_reason();
    result.preempted_requests += seq->metrics().num_preemptions > 0 ? 1 : 0;
    result.recomputed_tokens += seq->metrics().num_prefill_tokens - seq->num_prompt_tokens();
  }
  EXPECT_EQ(finished.size(), 16u);
  EXPECT_EQ(scheduler.block_snapshot().num_used, 0);
  EXPECT_EQ(scheduler.slot_snapshot().num_used, 0);
  result.preemptions = scheduler.metrics().totals().num_preemptions;
  result.peak_blocks = scheduler.metrics().totals().peak_used_blocks;
  return result;
}

class PreemptionTest : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(PreemptionTest, SmallPoolFinishesEverythingWithTheLargePoolTokens) {
  const auto [overlap, ignore_eos] = GetParam();
  const RunSummary large = run(/*num_blocks=*/1024, overlap, ignore_eos);
  const RunSummary small = run(/*num_blocks=*/17, overlap, ignore_eos);  // 64 tokens of KV for 8 running sequences
  EXPECT_EQ(large.preemptions, 0);
  EXPECT_GT(small.preemptions, 5);
  EXPECT_GE(small.preempted_requests, 3);
  EXPECT_GT(small.recomputed_tokens, 0);  // preempted requests were recomputed from their tokens
  EXPECT_LE(small.peak_blocks, 16);
  for (const auto& [id, reason] : small.reasons) {
    EXPECT_TRUE(reason == FinishReason::kStop || reason == FinishReason::kLength) << id;
  }
  EXPECT_EQ(small.reasons, large.reasons);
  EXPECT_EQ(small.outputs, large.outputs);
}

INSTANTIATE_TEST_SUITE_P(OverlapAndEos, PreemptionTest, ::testing::Combine(::testing::Bool(), ::testing::Bool()), [](const auto& info) {
  return std::string(std::get<0>(info.param) ? "Overlap" : "Sync") + (std::get<1>(info.param) ? "IgnoreEos" : "Eos");
});

TEST(PreemptionOverlapTest, SyncAndOverlappedRunsAgree) {
  const RunSummary sync = run(/*num_blocks=*/17, /*overlap=*/false, /*ignore_eos=*/false);
  const RunSummary overlapped = run(/*num_blocks=*/17, /*overlap=*/true, /*ignore_eos=*/false);
  EXPECT_EQ(sync.outputs, overlapped.outputs);
  EXPECT_EQ(sync.reasons, overlapped.reasons);
}

}  // namespace
}  // namespace deepinfer::engine
