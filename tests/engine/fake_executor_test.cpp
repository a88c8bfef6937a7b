#include "engine/fake_executor.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <vector>

namespace deepinfer::engine {
namespace {

constexpr int32_t kVocab = 50;

FakeExecutor make(int32_t delay_steps = 0) {
  return FakeExecutor(
      FakeExecutor::Options{.block_size = 4, .num_blocks = 8, .num_slots = 4, .vocab_size = kVocab, .delay_steps = delay_steps});
}

std::shared_ptr<const SamplingParams> seeded(uint64_t seed) {
  auto params = std::make_shared<SamplingParams>();
  params->seed = seed;
  return params;
}

ScheduledSeq row(SeqId id, int32_t start, std::vector<int32_t> tokens, bool sample, std::vector<int32_t> blocks, int32_t slot,
                 uint64_t seed = 42, int32_t epoch = 0) {
  ScheduledSeq r;
  r.seq_id = id;
  r.num_query_tokens = static_cast<int32_t>(tokens.size());
  r.start_pos = start;
  r.query_token_ids = std::move(tokens);
  r.sample = sample;
  r.epoch = epoch;
  r.block_table = std::move(blocks);
  r.state_slot = slot;
  r.params = seeded(seed);
  return r;
}

SchedulerOutput output(int64_t step, StepKind kind, std::vector<ScheduledSeq> rows) {
  SchedulerOutput out;
  out.step = step;
  out.kind = kind;
  for (const ScheduledSeq& r : rows) {
    out.num_batched_tokens += r.num_query_tokens;
    out.num_sampled += r.sample ? 1 : 0;
  }
  out.seqs = std::move(rows);
  return out;
}

TEST(FakeExecutorTest, ChunkedPrefillAndDecodeFollowTheOracle) {
  FakeExecutor executor = make();
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5, 9};
  auto r0 = executor.execute(output(0, StepKind::kPrefill, {row(1, 0, {3, 1, 4, 1}, false, {2, 5}, 1)}));
  ASSERT_TRUE(r0.has_value());
  EXPECT_TRUE(r0->tokens.empty());
  auto r1 = executor.execute(output(1, StepKind::kPrefill, {row(1, 4, {5, 9}, true, {2, 5}, 1)}));
  ASSERT_EQ(r1->tokens.size(), 1u);
  const int32_t t1 = r1->tokens[0].token_id;
  EXPECT_EQ(t1, FakeExecutor::next_token(42, prompt, kVocab));
  // Decode with the token still on the device (pending).
  auto r2 = executor.execute(output(2, StepKind::kDecode, {row(1, 6, {kPendingToken}, true, {2, 5}, 1)}));
  std::vector<int32_t> prefix = prompt;
  prefix.push_back(t1);
  EXPECT_EQ(r2->tokens[0].token_id, FakeExecutor::next_token(42, prefix, kVocab));
  // A different seed gives a different stream (with overwhelming probability over a few tokens).
  int32_t differ = 0;
  for (int32_t n = 1; n <= 8; ++n) {
    std::vector<int32_t> p(prompt.begin(), prompt.begin() + std::min<int32_t>(n, 6));
    differ += FakeExecutor::next_token(42, p, kVocab) != FakeExecutor::next_token(43, p, kVocab);
  }
  EXPECT_GT(differ, 0);
}

TEST(FakeExecutorTest, OneStepDelayHoldsEachResult) {
  FakeExecutor executor = make(/*delay_steps=*/1);
  auto r0 = executor.execute(output(0, StepKind::kPrefill, {row(1, 0, {7, 8}, true, {1}, 1)}));
  EXPECT_FALSE(r0.has_value());
  auto r1 = executor.execute(output(1, StepKind::kDecode, {row(1, 2, {kPendingToken}, true, {1}, 1)}));
  ASSERT_TRUE(r1.has_value());
  EXPECT_EQ(r1->step, 0);
  auto r2 = executor.flush();
  ASSERT_TRUE(r2.has_value());
  EXPECT_EQ(r2->step, 1);
  EXPECT_FALSE(executor.flush().has_value());
}

TEST(FakeExecutorTest, DetectsASlotContinuedByAnotherSequence) {
  FakeExecutor executor = make();
  executor.execute(output(0, StepKind::kPrefill, {row(1, 0, {1, 2}, false, {1}, 2)}));
  EXPECT_THROW(executor.execute(output(1, StepKind::kPrefill, {row(2, 2, {3}, true, {1}, 2)})), std::logic_error);
}

TEST(FakeExecutorTest, DetectsAGapInTheSlotState) {
  FakeExecutor executor = make();
  executor.execute(output(0, StepKind::kPrefill, {row(1, 0, {1, 2}, false, {1}, 2)}));
  EXPECT_THROW(executor.execute(output(1, StepKind::kPrefill, {row(1, 3, {3}, true, {1}, 2)})), std::logic_error);
}

TEST(FakeExecutorTest, DetectsABlockOverwrittenByAnotherSequence) {
  // Both sequences are given block 3: the second clobbers the first one's KV, which the first
  // then reads through its block table (the seed is chosen so the probe lands in block 3).
  uint64_t seed = 0;
  while (FakeExecutor::probe_position(seed, 5) >= 4) ++seed;
  FakeExecutor executor = make();
  executor.execute(output(0, StepKind::kPrefill, {row(1, 0, {1, 2, 3, 4}, false, {3, 4}, 1, seed)}));
  executor.execute(output(1, StepKind::kPrefill, {row(2, 0, {5, 6, 7, 8}, false, {3}, 2, seed)}));
  EXPECT_THROW(executor.execute(output(2, StepKind::kPrefill, {row(1, 4, {9}, true, {3, 4}, 1, seed)})), std::logic_error);
  // The same steps with separate blocks run fine.
  FakeExecutor clean = make();
  clean.execute(output(0, StepKind::kPrefill, {row(1, 0, {1, 2, 3, 4}, false, {3, 4}, 1, seed)}));
  clean.execute(output(1, StepKind::kPrefill, {row(2, 0, {5, 6, 7, 8}, false, {5}, 2, seed)}));
  auto result = clean.execute(output(2, StepKind::kPrefill, {row(1, 4, {9}, true, {3, 4}, 1, seed)}));
  EXPECT_EQ(result->tokens[0].token_id, FakeExecutor::next_token(seed, std::vector<int32_t>{1, 2, 3, 4, 9}, kVocab));
}

TEST(FakeExecutorTest, DetectsAStaleEpochAndAMissingPendingToken) {
  FakeExecutor executor = make();
  executor.execute(output(0, StepKind::kPrefill, {row(1, 0, {1, 2}, true, {1}, 1)}));
  // Continuing the slot under a new epoch without restarting at position 0.
  EXPECT_THROW(executor.execute(output(1, StepKind::kDecode, {row(1, 2, {kPendingToken}, true, {1}, 1, 42, /*epoch=*/1)})),
               std::logic_error);
  FakeExecutor fresh = make();
  fresh.execute(output(0, StepKind::kPrefill, {row(1, 0, {1, 2}, false, {1}, 1)}));
  EXPECT_THROW(fresh.execute(output(1, StepKind::kDecode, {row(1, 2, {kPendingToken}, true, {1}, 1)})), std::logic_error);
}

TEST(FakeExecutorTest, DetectsMalformedSteps) {
  FakeExecutor executor = make();
  executor.execute(output(1, StepKind::kIdle, {}));                                  // an idle step 0 may be skipped
  EXPECT_THROW(executor.execute(output(1, StepKind::kIdle, {})), std::logic_error);  // step 1 twice
  FakeExecutor other = make();
  EXPECT_THROW(other.execute(output(0, StepKind::kDecode, {row(1, 0, {1, 2}, true, {1}, 1)})), std::logic_error);
  FakeExecutor third = make();
  EXPECT_THROW(third.execute(output(0, StepKind::kPrefill, {row(1, 0, {1, 2, 3, 4, 5}, true, {1}, 1)})),
               std::logic_error);  // 5 tokens, one 4-token block
}

}  // namespace
}  // namespace deepinfer::engine
