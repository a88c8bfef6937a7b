// Targeted scheduler scenarios: admission, chunking, FCFS, budgets, ordering, preemption,
// the overlapped step contract, stop rules, cancellation and metrics. The randomized
// lifecycle test covers the combinations.

#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <numeric>
#include <stdexcept>
#include <vector>

#include "engine/check.h"

namespace deepinfer::engine {
namespace {

Scheduler::Options options(int32_t block_size, int32_t num_blocks, int32_t num_slots) {
  return Scheduler::Options{.block_size = block_size,
                            .num_blocks = num_blocks,
                            .num_slots = num_slots,
                            .max_num_seqs = 8,
                            .max_num_batched_tokens = 64,
                            .max_model_len = 1024,
                            .eos_token_id = 0,
                            .watermark_blocks = 0};
}

std::vector<int32_t> prompt(int32_t n, int32_t first = 1) {
  std::vector<int32_t> tokens(n);
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

SamplingParams params(int32_t max_tokens = 16) {
  SamplingParams p;
  p.max_tokens = max_tokens;
  return p;
}

// A result giving `token` to every sampled row of `out`.
StepResult answer(const SchedulerOutput& out, int32_t token = 7) {
  StepResult result{.step = out.step, .tokens = {}};
  for (const ScheduledSeq& row : out.seqs) {
    if (row.sample) result.tokens.push_back(SampledToken{.seq_id = row.seq_id, .epoch = row.epoch, .token_id = token});
  }
  return result;
}

// schedule + process at once (no overlap), with invariants checked.
SchedulerOutput step(Scheduler& scheduler, int32_t token = 7) {
  SchedulerOutput out = scheduler.schedule();
  scheduler.check_invariants();
  scheduler.process(answer(out, token));
  scheduler.check_invariants();
  return out;
}

TEST(SchedulerTest, RejectsBadOptions) {
  Scheduler::Options o = options(4, 8, 4);
  o.max_model_len = 1;
  EXPECT_THROW(Scheduler{o}, std::invalid_argument);
  o = options(4, 8, 4);
  o.max_num_batched_tokens = 0;
  EXPECT_THROW(Scheduler{o}, std::invalid_argument);
  o = options(4, 8, 4);
  o.watermark_blocks = 7;
  EXPECT_THROW(Scheduler{o}, std::invalid_argument);
  o = options(4, 1, 4);
  EXPECT_THROW(Scheduler{o}, std::invalid_argument);
}

TEST(SchedulerTest, BadRequestsFinishWithErrorAndDoNotBlockTheQueue) {
  Scheduler::Options o = options(/*block_size=*/4, /*num_blocks=*/5, /*num_slots=*/4);  // 16 tokens of KV
  o.max_model_len = 12;
  Scheduler scheduler(o);
  EXPECT_EQ(scheduler.max_len(), 12);
  SamplingParams bad = params();
  bad.top_p = 0.0f;
  const SeqId invalid = scheduler.add_request("bad-params", prompt(3), bad);
  const SeqId empty = scheduler.add_request("empty", {}, params());
  const SeqId negative = scheduler.add_request("negative", {1, -4}, params());
  const SeqId too_long = scheduler.add_request("too-long", prompt(12), params());
  const SeqId ok = scheduler.add_request("ok", prompt(11), params());
  SchedulerOutput out = scheduler.schedule();
  EXPECT_EQ(out.ignored, (std::vector<SeqId>{invalid, empty, negative, too_long}));
  ASSERT_EQ(out.seqs.size(), 1u);
  EXPECT_EQ(out.seqs[0].seq_id, ok);
  auto finished = scheduler.take_finished();
  ASSERT_EQ(finished.size(), 4u);
  for (const auto& seq : finished) EXPECT_EQ(seq->finish_reason(), FinishReason::kError) << seq->request_id();
  EXPECT_NE(finished[0]->finish_message().find("top_p must be in (0, 1], got 0"), std::string::npos);
  EXPECT_EQ(finished[1]->finish_message(), "empty prompt");
  EXPECT_NE(finished[2]->finish_message().find("prompt token 1 is negative: -4"), std::string::npos);
  EXPECT_NE(finished[3]->finish_message().find("max_model_len=12"), std::string::npos);
  EXPECT_EQ(scheduler.metrics().totals().finished(FinishReason::kError), 4);
}

TEST(SchedulerTest, PromptLargerThanThePoolIsAnError) {
  Scheduler scheduler(options(/*block_size=*/4, /*num_blocks=*/3, /*num_slots=*/2));  // 8 tokens of KV
  EXPECT_EQ(scheduler.max_len(), 8);
  scheduler.add_request("fits", prompt(7), params());
  const SeqId huge = scheduler.add_request("huge", prompt(8), params());
  auto finished = scheduler.take_finished();
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0]->id(), huge);
  EXPECT_NE(finished[0]->finish_message().find("does not fit in the KV pool (2 blocks x 4 tokens)"), std::string::npos)
      << finished[0]->finish_message();
}

TEST(SchedulerTest, ChunkedPrefillAllocatesOnceAndSamplesOnlyTheLastChunk) {
  Scheduler::Options o = options(/*block_size=*/4, /*num_blocks=*/16, /*num_slots=*/4);
  o.max_num_batched_tokens = 4;
  Scheduler scheduler(o);
  const SeqId id = scheduler.add_request("r", prompt(10), params());
  std::vector<int32_t> table;
  int32_t slot = kNoSlot;
  const int32_t chunks[] = {4, 4, 2};
  int32_t start = 0;
  for (int32_t i = 0; i < 3; ++i) {
    SchedulerOutput out = step(scheduler);
    ASSERT_EQ(out.kind, StepKind::kPrefill);
    ASSERT_EQ(out.seqs.size(), 1u);
    const ScheduledSeq& row = out.seqs[0];
    EXPECT_EQ(row.seq_id, id);
    EXPECT_EQ(row.num_query_tokens, chunks[i]);
    EXPECT_EQ(row.start_pos, start);
    const std::vector<int32_t> tokens = prompt(10);
    EXPECT_EQ(row.query_token_ids, std::vector<int32_t>(tokens.begin() + start, tokens.begin() + start + chunks[i]));
    EXPECT_EQ(row.sample, i == 2);
    EXPECT_EQ(row.block_table.size(), 3u);  // the whole prompt from the first chunk
    if (i == 0) {
      table = row.block_table;
      slot = row.state_slot;
    }
    EXPECT_EQ(row.block_table, table);
    EXPECT_EQ(row.state_slot, slot);
    start += chunks[i];
  }
  const Sequence* seq = scheduler.find(id);
  EXPECT_EQ(seq->num_output_tokens(), 1);
  EXPECT_EQ(seq->metrics().num_prefill_chunks, 3);
  EXPECT_EQ(seq->metrics().first_token_step, 2);
  // Next step decodes the sampled token at position 10 (block 3 still has room).
  SchedulerOutput out = step(scheduler);
  ASSERT_EQ(out.kind, StepKind::kDecode);
  EXPECT_EQ(out.seqs[0].start_pos, 10);
  EXPECT_EQ(out.seqs[0].query_token_ids, std::vector<int32_t>{7});
  EXPECT_EQ(out.seqs[0].output_index, 1);
}

// Prompt logprobs: each chunk scores the rows whose next position is still in the prompt, and
// names the token after the chunk for its last row; a request that does not ask scores nothing.
TEST(SchedulerTest, PromptLogprobRowsCoverEveryPromptTokenAfterTheFirstOnce) {
  Scheduler::Options o = options(/*block_size=*/4, /*num_blocks=*/16, /*num_slots=*/4);
  o.max_num_batched_tokens = 4;
  Scheduler scheduler(o);
  SamplingParams asks = params();
  asks.prompt_logprobs = 2;
  const std::vector<int32_t> tokens = prompt(10);
  scheduler.add_request("r", tokens, asks);
  const int32_t scored[] = {4, 4, 1}, next[] = {5, 9, -1};  // chunks of 4, 4, 2: positions 1..9 scored
  for (int32_t i = 0; i < 3; ++i) {
    SchedulerOutput out = step(scheduler);
    ASSERT_EQ(out.seqs.size(), 1u);
    EXPECT_EQ(out.seqs[0].prompt_scored, scored[i]) << "chunk " << i;
    EXPECT_EQ(out.seqs[0].next_prompt_token, next[i]) << "chunk " << i;
  }
  SchedulerOutput decode = step(scheduler);
  ASSERT_EQ(decode.kind, StepKind::kDecode);
  EXPECT_EQ(decode.seqs[0].prompt_scored, 0);

  Scheduler other(o);
  other.add_request("s", prompt(6), params());
  EXPECT_EQ(step(other).seqs[0].prompt_scored, 0);
}

TEST(SchedulerTest, FcfsStopsAtAHeadThatDoesNotFit) {
  Scheduler scheduler(options(/*block_size=*/4, /*num_blocks=*/5, /*num_slots=*/8));  // 4 usable blocks
  const SeqId a = scheduler.add_request("a", prompt(8), params(8));                   // 2 blocks
  const SeqId b = scheduler.add_request("b", prompt(12), params(8));                  // 3 blocks: does not fit next to a
  const SeqId c = scheduler.add_request("c", prompt(2), params(8));                   // 1 block: would fit, must not skip b
  SchedulerOutput out = step(scheduler);
  ASSERT_EQ(out.seqs.size(), 1u);
  EXPECT_EQ(out.seqs[0].seq_id, a);
  ASSERT_EQ(scheduler.waiting().size(), 2u);
  EXPECT_EQ(scheduler.waiting()[0]->id(), b);
  EXPECT_EQ(scheduler.waiting()[1]->id(), c);
  out = step(scheduler);
  EXPECT_EQ(out.kind, StepKind::kDecode);  // b still does not fit: decode a instead
  ASSERT_EQ(out.seqs.size(), 1u);
  EXPECT_EQ(out.seqs[0].seq_id, a);
}

TEST(SchedulerTest, MaxNumSeqsAndTokenBudgetBoundAStep) {
  Scheduler::Options o = options(/*block_size=*/4, /*num_blocks=*/64, /*num_slots=*/16);
  o.max_num_seqs = 2;
  o.max_num_batched_tokens = 5;
  Scheduler scheduler(o);
  for (int i = 0; i < 4; ++i) scheduler.add_request("r" + std::to_string(i), prompt(2), params(4));
  SchedulerOutput out = step(scheduler);
  EXPECT_EQ(out.seqs.size(), 2u);  // max_num_seqs, though the budget would take a third
  EXPECT_EQ(out.num_batched_tokens, 4);
  EXPECT_EQ(scheduler.running().size(), 2u);
}

TEST(SchedulerTest, PrefillAndDecodeAreNeverMixed) {
  Scheduler scheduler(options(/*block_size=*/4, /*num_blocks=*/64, /*num_slots=*/16));
  scheduler.add_request("a", prompt(3), params(8));
  EXPECT_EQ(step(scheduler).kind, StepKind::kPrefill);
  scheduler.add_request("b", prompt(3), params(8));
  SchedulerOutput out = step(scheduler);  // b's prefill waits for nothing: a does not decode now
  EXPECT_EQ(out.kind, StepKind::kPrefill);
  ASSERT_EQ(out.seqs.size(), 1u);
  out = step(scheduler);
  EXPECT_EQ(out.kind, StepKind::kDecode);
  EXPECT_EQ(out.seqs.size(), 2u);
}

TEST(SchedulerTest, DecodeOrdersByOutputLengthAndPreemptsTheLongest) {
  Scheduler scheduler(options(/*block_size=*/4, /*num_blocks=*/6, /*num_slots=*/4));  // 5 usable blocks
  const SeqId a = scheduler.add_request("a", prompt(6), params(12));                  // 2 blocks
  step(scheduler);                                                                    // a: 1 output
  step(scheduler);                                                                    // a: 2 outputs, position 6 written
  const SeqId b = scheduler.add_request("b", prompt(3), params(12));                  // 1 block
  step(scheduler);
  const SeqId c = scheduler.add_request("c", prompt(4), params(12));  // 1 block
  step(scheduler);
  ASSERT_EQ(scheduler.block_snapshot().num_used, 4);
  // Outputs: a 2, b 1, c 1. Shortest first, ties by arrival; c (position 4) takes the last block.
  SchedulerOutput out = step(scheduler);
  ASSERT_EQ(out.kind, StepKind::kDecode);
  ASSERT_EQ(out.seqs.size(), 3u);
  EXPECT_EQ(out.seqs[0].seq_id, b);
  EXPECT_EQ(out.seqs[1].seq_id, c);
  EXPECT_EQ(out.seqs[2].seq_id, a);
  EXPECT_EQ(scheduler.block_snapshot().num_used, 5);
  // b at position 4 needs a block: none is free, so the longest output (a) is preempted for it.
  out = step(scheduler);
  EXPECT_EQ(out.preempted, std::vector<SeqId>{a});
  ASSERT_EQ(out.seqs.size(), 2u);
  EXPECT_EQ(out.seqs[0].seq_id, b);
  EXPECT_EQ(out.seqs[1].seq_id, c);
  const Sequence* seq_a = scheduler.find(a);
  EXPECT_EQ(seq_a->status(), SequenceStatus::kWaiting);
  EXPECT_EQ(seq_a->epoch(), 1);
  EXPECT_EQ(seq_a->num_output_tokens(), 3);  // committed tokens survive preemption
  EXPECT_EQ(seq_a->metrics().num_preemptions, 1);
  EXPECT_EQ(scheduler.waiting().front()->id(), a);
  EXPECT_EQ(scheduler.metrics().totals().num_preemptions, 1);
  EXPECT_EQ(scheduler.metrics().last_step().num_preempted, 1);
  // The only sequence left that needs a block and finds none preempts itself (it is the longest).
  Scheduler alone(options(/*block_size=*/4, /*num_blocks=*/3, /*num_slots=*/4));  // 2 usable blocks
  const SeqId x = alone.add_request("x", prompt(4), params(12));
  const SeqId y = alone.add_request("y", prompt(4), params(12));
  step(alone);        // both prefilled, pool full
  out = step(alone);  // x (tie, older) needs a block at position 4: y is preempted
  EXPECT_EQ(out.preempted, std::vector<SeqId>{y});
  EXPECT_EQ(out.seqs.size(), 1u);
  EXPECT_EQ(out.seqs[0].seq_id, x);
}

TEST(SchedulerTest, OverlappedStepsUsePendingTokensAndDiscardStaleResults) {
  // One sequence alone, then a second one that forces the first out while its result is in flight.
  Scheduler scheduler(options(/*block_size=*/2, /*num_blocks=*/4, /*num_slots=*/4));  // 3 usable blocks
  const SeqId a = scheduler.add_request("a", prompt(2), params(10));
  SchedulerOutput s0 = scheduler.schedule();  // prefill a (1 block), samples
  SchedulerOutput s1 = scheduler.schedule();  // decode a before s0 is processed
  scheduler.check_invariants();
  ASSERT_EQ(s1.kind, StepKind::kDecode);
  EXPECT_EQ(s1.seqs[0].query_token_ids, std::vector<int32_t>{kPendingToken});
  EXPECT_EQ(s1.seqs[0].start_pos, 2);
  EXPECT_EQ(s1.seqs[0].block_table.size(), 2u);
  EXPECT_EQ(scheduler.find(a)->num_inflight_tokens(), 2);
  EXPECT_THROW(scheduler.schedule(), std::logic_error);        // process(s0) must come first
  EXPECT_THROW(scheduler.process(answer(s1)), InternalError);  // out of order
  auto committed = scheduler.process(answer(s0, 11));
  ASSERT_EQ(committed.size(), 1u);
  EXPECT_EQ(committed[0].output_index, 0);
  scheduler.check_invariants();

  const SeqId b = scheduler.add_request("b", prompt(2), params(10));
  SchedulerOutput s2 = scheduler.schedule();  // prefill b takes the last block
  ASSERT_EQ(s2.kind, StepKind::kPrefill);
  scheduler.process(answer(s1, 12));
  SchedulerOutput s3 = scheduler.schedule();  // decode: b (shorter) needs a block; a (longest) is preempted
  scheduler.check_invariants();
  EXPECT_EQ(s3.preempted, std::vector<SeqId>{a});
  ASSERT_EQ(s3.seqs.size(), 1u);
  EXPECT_EQ(s3.seqs[0].seq_id, b);
  scheduler.process(answer(s2, 13));
  scheduler.check_invariants();

  // a waits at the head for blocks; b keeps decoding with overlapped steps.
  SchedulerOutput s4 = scheduler.schedule();
  scheduler.process(answer(s3, 14));
  scheduler.process(answer(s4, 15));
  scheduler.check_invariants();
  const Sequence* seq_a = scheduler.find(a);
  EXPECT_EQ(seq_a->status(), SequenceStatus::kWaiting);
  EXPECT_EQ(seq_a->epoch(), 1);
  EXPECT_EQ(std::vector<int32_t>(seq_a->output_token_ids().begin(), seq_a->output_token_ids().end()), (std::vector<int32_t>{11, 12}));
  EXPECT_EQ(scheduler.find(b)->num_output_tokens(), 3);
}

TEST(SchedulerTest, ResultInFlightForAPreemptedSequenceIsDiscarded) {
  Scheduler scheduler(options(/*block_size=*/2, /*num_blocks=*/4, /*num_slots=*/4));  // 3 usable blocks
  const SeqId a = scheduler.add_request("a", prompt(3), params(3));                   // 2 blocks
  const SeqId b = scheduler.add_request("b", prompt(1), params(8));                   // 1 block
  step(scheduler);                                                                    // both prefilled, 1 output each; the pool is full
  SchedulerOutput s1 = scheduler.schedule();                                          // decode a (position 3) and b (position 1)
  ASSERT_EQ(s1.seqs.size(), 2u);
  SchedulerOutput s2 = scheduler.schedule();  // overlapped: a at position 4 needs a block -> b preempted
  scheduler.check_invariants();
  EXPECT_EQ(s2.preempted, std::vector<SeqId>{b});
  ASSERT_EQ(s2.seqs.size(), 1u);
  EXPECT_EQ(s2.seqs[0].seq_id, a);
  EXPECT_EQ(scheduler.find(b)->epoch(), 1);

  auto committed = scheduler.process(answer(s1, 21));  // b's row carries epoch 0: stale
  scheduler.check_invariants();
  ASSERT_EQ(committed.size(), 1u);
  EXPECT_EQ(committed[0].seq_id, a);
  EXPECT_EQ(scheduler.find(b)->num_output_tokens(), 1);
  EXPECT_EQ(scheduler.metrics().totals().num_discarded_results, 1);

  // a finishes by max_tokens at its commit point: blocks and slot return at once.
  committed = scheduler.process(answer(s2, 22));
  ASSERT_EQ(committed.size(), 1u);
  EXPECT_TRUE(committed[0].finished);
  scheduler.check_invariants();
  EXPECT_EQ(scheduler.block_snapshot().num_used, 0);
  EXPECT_EQ(scheduler.slot_snapshot().num_used, 0);
  SchedulerOutput s3 = scheduler.schedule();
  EXPECT_EQ(s3.finished, std::vector<SeqId>{a});
  ASSERT_EQ(s3.kind, StepKind::kPrefill);  // b is recomputed: prompt + its committed output
  EXPECT_EQ(s3.seqs[0].seq_id, b);
  EXPECT_EQ(s3.seqs[0].start_pos, 0);
  EXPECT_EQ(s3.seqs[0].num_query_tokens, 2);
  EXPECT_EQ(s3.seqs[0].epoch, 1);
  EXPECT_EQ(s3.seqs[0].output_index, 1);
  auto finished = scheduler.take_finished();
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0]->finish_reason(), FinishReason::kLength);
  EXPECT_EQ(finished[0]->finish_message(), "max_tokens=3");
  EXPECT_EQ(std::vector<int32_t>(finished[0]->output_token_ids().begin(), finished[0]->output_token_ids().end()),
            (std::vector<int32_t>{7, 21, 22}));
}

}  // namespace
}  // namespace deepinfer::engine
