#include "engine/sequence.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <vector>

namespace deepinfer::engine {
namespace {

Sequence make_sequence(std::vector<int32_t> prompt) {
  return Sequence(/*id=*/7, "req-7", std::move(prompt), std::make_shared<const SamplingParams>(), /*arrival_step=*/3);
}

TEST(SequenceTest, StartsWaitingWithNothing) {
  Sequence seq = make_sequence({1, 2, 3});
  EXPECT_EQ(seq.id(), 7);
  EXPECT_EQ(seq.request_id(), "req-7");
  EXPECT_EQ(seq.status(), SequenceStatus::kWaiting);
  EXPECT_EQ(seq.num_tokens(), 3);
  EXPECT_EQ(seq.num_prompt_tokens(), 3);
  EXPECT_EQ(seq.num_output_tokens(), 0);
  EXPECT_EQ(seq.get_len(), 3);
  EXPECT_EQ(seq.state_slot(), kNoSlot);
  EXPECT_FALSE(seq.holds_resources());
  EXPECT_EQ(seq.metrics().arrival_step, 3);
}

TEST(SequenceTest, ChunkedPrefillThenDecodeKeepsTheViewsLegal) {
  Sequence seq = make_sequence({1, 2, 3, 4, 5});
  seq.admit({4, 5}, /*slot=*/2);
  EXPECT_TRUE(seq.is_prefilling());
  EXPECT_THROW(seq.reserve_decode(0), std::logic_error);                       // not decode-legal yet
  EXPECT_THROW(seq.reserve_prefill(0, 3, /*sample=*/true), std::logic_error);  // not the last chunk
  seq.reserve_prefill(0, 3, /*sample=*/false);
  EXPECT_EQ(seq.num_cached_tokens(), 3);
  EXPECT_EQ(seq.num_inflight_tokens(), 0);
  EXPECT_THROW(seq.reserve_prefill(1, 2, /*sample=*/false), std::logic_error);  // last chunk must sample
  seq.reserve_prefill(1, 2, /*sample=*/true);
  EXPECT_FALSE(seq.is_prefilling());
  EXPECT_EQ(seq.get_len(), 6);
  EXPECT_TRUE(seq.is_decode_legal());
  // Overlap: decode again before the sampled token is committed.
  seq.reserve_decode(2);
  EXPECT_EQ(seq.num_inflight_tokens(), 2);
  EXPECT_EQ(seq.num_cached_tokens(), 6);
  EXPECT_TRUE(seq.is_decode_legal());
  seq.commit_token(40);
  seq.commit_token(41);
  EXPECT_EQ(seq.num_inflight_tokens(), 0);
  EXPECT_THROW(seq.commit_token(42), std::logic_error);  // no reservation left
  EXPECT_EQ(std::vector<int32_t>(seq.output_token_ids().begin(), seq.output_token_ids().end()), (std::vector<int32_t>{40, 41}));
  EXPECT_TRUE(seq.is_decode_legal());
  EXPECT_EQ(seq.last_scheduled_step(), 2);
}

TEST(SequenceTest, PreemptReleasesEverythingAndBumpsTheEpoch) {
  Sequence seq = make_sequence({1, 2});
  seq.admit({3}, /*slot=*/1);
  seq.reserve_prefill(0, 2, /*sample=*/true);
  Sequence::Resources resources = seq.preempt();
  EXPECT_EQ(resources.blocks, (std::vector<int32_t>{3}));
  EXPECT_EQ(resources.slot, 1);
  EXPECT_EQ(seq.status(), SequenceStatus::kWaiting);
  EXPECT_EQ(seq.epoch(), 1);
  EXPECT_EQ(seq.num_cached_tokens(), 0);
  EXPECT_EQ(seq.num_inflight_tokens(), 0);
  EXPECT_FALSE(seq.holds_resources());
  EXPECT_EQ(seq.metrics().num_preemptions, 1);
  EXPECT_THROW(seq.preempt(), std::logic_error);
}

TEST(SequenceTest, FinishNeedsReleasedResources) {
  Sequence seq = make_sequence({1});
  seq.admit({2}, /*slot=*/1);
  EXPECT_THROW(seq.finish(FinishReason::kStop, "eos"), std::logic_error);
  seq.release_resources();
  seq.finish(FinishReason::kStop, "eos");
  EXPECT_TRUE(seq.is_finished());
  EXPECT_EQ(seq.finish_reason(), FinishReason::kStop);
  EXPECT_EQ(seq.finish_message(), "eos");
  EXPECT_EQ(seq.epoch(), 1);
  EXPECT_THROW(seq.finish(FinishReason::kAbort, ""), std::logic_error);
  EXPECT_THROW(seq.request_termination(FinishReason::kAbort, ""), std::logic_error);
}

TEST(SequenceTest, AdmitChecksItsPreconditions) {
  Sequence seq = make_sequence({1});
  EXPECT_THROW(seq.admit({2}, kPaddingSlot), std::logic_error);
  seq.admit({2}, /*slot=*/1);
  EXPECT_THROW(seq.admit({3}, /*slot=*/2), std::logic_error);
}

TEST(SequenceTest, FirstTerminationRequestWins) {
  Sequence seq = make_sequence({1});
  seq.request_termination(FinishReason::kAbort, "cancelled");
  seq.request_termination(FinishReason::kStop, "stop string");
  EXPECT_TRUE(seq.termination_pending());
  EXPECT_EQ(seq.pending_reason(), FinishReason::kAbort);
  EXPECT_EQ(seq.pending_message(), "cancelled");
}

}  // namespace
}  // namespace deepinfer::engine
