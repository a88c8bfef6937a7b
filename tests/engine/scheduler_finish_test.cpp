// Scheduler: the ends of a request: stop rules at the commit point, cancellation in the
// design's order, external termination, watermark admission and metrics.

#include <gtest/gtest.h>

#include <numeric>
#include <stdexcept>
#include <vector>

#include "engine/check.h"
#include "engine/scheduler.h"

namespace deepinfer::engine {
namespace {

constexpr int32_t kEos = 2;

Scheduler::Options options() {
  return Scheduler::Options{.block_size = 4,
                            .num_blocks = 33,
                            .num_slots = 9,
                            .max_num_seqs = 8,
                            .max_num_batched_tokens = 64,
                            .max_model_len = 64,
                            .eos_token_id = kEos,
                            .watermark_blocks = 0};
}

StepResult answer(const SchedulerOutput& out, int32_t token) {
  StepResult result{.step = out.step, .tokens = {}};
  for (const ScheduledSeq& row : out.seqs) {
    if (row.sample) result.tokens.push_back(SampledToken{.seq_id = row.seq_id, .epoch = row.epoch, .token_id = token});
  }
  return result;
}

// Feeds `tokens` one per step to a single request and returns it once finished (or nullptr).
std::unique_ptr<Sequence> run_single(Scheduler& scheduler, const SamplingParams& params, const std::vector<int32_t>& tokens,
                                     int32_t prompt_len = 3) {
  std::vector<int32_t> prompt(prompt_len);
  std::iota(prompt.begin(), prompt.end(), 10);
  scheduler.add_request("r", prompt, params);
  for (int32_t token : tokens) {
    SchedulerOutput out = scheduler.schedule();
    scheduler.process(answer(out, token));
    scheduler.check_invariants();
    auto finished = scheduler.take_finished();
    if (!finished.empty()) return std::move(finished[0]);
  }
  return nullptr;
}

TEST(SchedulerFinishTest, EosStops) {
  Scheduler scheduler(options());
  SamplingParams params;
  auto seq = run_single(scheduler, params, {5, 6, kEos, 7});
  ASSERT_NE(seq, nullptr);
  EXPECT_EQ(seq->finish_reason(), FinishReason::kStop);
  EXPECT_EQ(seq->finish_message(), "eos");
  EXPECT_EQ(seq->num_output_tokens(), 3);  // the EOS is part of the output
  EXPECT_EQ(scheduler.block_snapshot().num_used, 0);
  EXPECT_EQ(scheduler.slot_snapshot().num_used, 0);
}

TEST(SchedulerFinishTest, IgnoreEosAndMaxTokens) {
  Scheduler scheduler(options());
  SamplingParams params;
  params.ignore_eos = true;
  params.max_tokens = 4;
  auto seq = run_single(scheduler, params, {kEos, kEos, kEos, kEos, kEos});
  ASSERT_NE(seq, nullptr);
  EXPECT_EQ(seq->finish_reason(), FinishReason::kLength);
  EXPECT_EQ(seq->finish_message(), "max_tokens=4");
  EXPECT_EQ(seq->num_output_tokens(), 4);
}

TEST(SchedulerFinishTest, StopTokensWaitForMinTokens) {
  Scheduler scheduler(options());
  SamplingParams params;
  params.stop_token_ids = {9};
  params.min_tokens = 2;
  auto seq = run_single(scheduler, params, {9, kEos, 9, 5});
  ASSERT_NE(seq, nullptr);
  EXPECT_EQ(seq->finish_reason(), FinishReason::kStop);
  EXPECT_EQ(seq->finish_message(), "stop token 9");
  EXPECT_EQ(seq->num_output_tokens(), 3);
}

TEST(SchedulerFinishTest, MaxModelLenEndsWithLength) {
  Scheduler::Options o = options();
  o.max_model_len = 6;
  Scheduler scheduler(o);
  SamplingParams params;
  params.max_tokens = 100;
  auto seq = run_single(scheduler, params, {5, 5, 5, 5, 5}, /*prompt_len=*/3);
  ASSERT_NE(seq, nullptr);
  EXPECT_EQ(seq->finish_reason(), FinishReason::kLength);
  EXPECT_EQ(seq->finish_message(), "max_model_len=6");
  EXPECT_EQ(seq->num_tokens(), 6);
}

TEST(SchedulerFinishTest, PoolCapacityEndsWithLength) {
  Scheduler::Options o = options();
  o.num_blocks = 3;  // 8 tokens of KV
  Scheduler scheduler(o);
  SamplingParams params;
  params.max_tokens = 100;
  auto seq = run_single(scheduler, params, std::vector<int32_t>(10, 5), /*prompt_len=*/3);
  ASSERT_NE(seq, nullptr);
  EXPECT_EQ(seq->finish_reason(), FinishReason::kLength);
  EXPECT_EQ(seq->finish_message(), "KV pool capacity=8 tokens");
  EXPECT_EQ(seq->num_tokens(), 8);
}

TEST(SchedulerFinishTest, LengthFinishIsNotScheduledAgainUnderOverlap) {
  Scheduler scheduler(options());
  SamplingParams params;
  params.max_tokens = 1;
  scheduler.add_request("r", {1, 2}, params);
  SchedulerOutput s0 = scheduler.schedule();
  SchedulerOutput s1 = scheduler.schedule();  // its only token is in flight: nothing more to run
  EXPECT_EQ(s1.kind, StepKind::kIdle);
  scheduler.process(answer(s0, 5));
  scheduler.process(answer(s1, 5));
  EXPECT_FALSE(scheduler.has_unfinished());
  scheduler.check_invariants();
}

TEST(SchedulerFinishTest, CancelWaitingSequenceIsImmediate) {
  Scheduler::Options o = options();
  o.max_num_seqs = 1;
  Scheduler scheduler(o);
  const SeqId a = scheduler.add_request("a", {1, 2}, SamplingParams{});
  const SeqId b = scheduler.add_request("b", {1, 2}, SamplingParams{});
  SchedulerOutput out = scheduler.schedule();
  scheduler.process(answer(out, 5));
  EXPECT_TRUE(scheduler.cancel(b));  // waiting, never scheduled: nothing in flight
  EXPECT_EQ(scheduler.find(b)->finish_reason(), FinishReason::kAbort);
  EXPECT_FALSE(scheduler.cancel(b));  // already finished
  EXPECT_FALSE(scheduler.cancel(12345));
  scheduler.check_invariants();
  out = scheduler.schedule();
  EXPECT_EQ(out.cancelled, std::vector<SeqId>{b});
  EXPECT_EQ(out.seqs.size(), 1u);
  EXPECT_EQ(out.seqs[0].seq_id, a);
}

TEST(SchedulerFinishTest, CancelWaitsForTheStepInFlightThenReleasesBoth) {
  Scheduler scheduler(options());
  const SeqId a = scheduler.add_request("a", {1, 2, 3}, SamplingParams{});
  const SeqId b = scheduler.add_request("b", {1, 2, 3}, SamplingParams{});
  SchedulerOutput s0 = scheduler.schedule();
  scheduler.process(answer(s0, 5));
  SchedulerOutput s1 = scheduler.schedule();  // decode a and b; the device is running it
  const int32_t used_blocks = scheduler.block_snapshot().num_used;
  EXPECT_TRUE(scheduler.cancel(a));
  // (1) The step is still in flight: a keeps its blocks and slot, is not finished yet...
  const Sequence* seq_a = scheduler.find(a);
  EXPECT_FALSE(seq_a->is_finished());
  EXPECT_TRUE(seq_a->termination_pending());
  EXPECT_EQ(scheduler.block_snapshot().num_used, used_blocks);
  EXPECT_EQ(scheduler.slot_snapshot().num_used, 2);
  scheduler.check_invariants();
  // ...and is not scheduled again.
  SchedulerOutput s2 = scheduler.schedule();
  ASSERT_EQ(s2.seqs.size(), 1u);
  EXPECT_EQ(s2.seqs[0].seq_id, b);
  // (2-5) Once its step is processed: result discarded, epoch bumped, removed, released, abort.
  const int32_t epoch = seq_a->epoch();
  auto committed = scheduler.process(answer(s1, 6));
  ASSERT_EQ(committed.size(), 1u);
  EXPECT_EQ(committed[0].seq_id, b);
  EXPECT_TRUE(seq_a->is_finished());
  EXPECT_EQ(seq_a->finish_reason(), FinishReason::kAbort);
  EXPECT_EQ(seq_a->num_output_tokens(), 1);
  EXPECT_GT(seq_a->epoch(), epoch);
  EXPECT_FALSE(seq_a->holds_resources());
  EXPECT_EQ(scheduler.slot_snapshot().num_used, 1);
  EXPECT_EQ(scheduler.running().size(), 1u);
  scheduler.check_invariants();
  scheduler.process(answer(s2, 7));
  SchedulerOutput s3 = scheduler.schedule();
  EXPECT_EQ(s3.cancelled, std::vector<SeqId>{a});
  EXPECT_EQ(scheduler.metrics().totals().finished(FinishReason::kAbort), 1);
}

TEST(SchedulerFinishTest, TerminateWithStopForAStopString) {
  Scheduler scheduler(options());
  const SeqId a = scheduler.add_request("a", {1, 2, 3}, SamplingParams{});
  SchedulerOutput s0 = scheduler.schedule();
  scheduler.process(answer(s0, 5));
  EXPECT_THROW(scheduler.terminate(a, FinishReason::kLength, "x"), InternalError);
  EXPECT_TRUE(scheduler.terminate(a, FinishReason::kStop, "stop string \"##\""));
  auto finished = scheduler.take_finished();
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0]->finish_reason(), FinishReason::kStop);
  EXPECT_EQ(finished[0]->finish_message(), "stop string \"##\"");
  EXPECT_EQ(scheduler.block_snapshot().num_used, 0);
}

TEST(SchedulerFinishTest, WatermarkKeepsBlocksFreeOnlyWhileOthersRun) {
  Scheduler::Options o = options();
  o.num_blocks = 9;  // 8 usable
  o.watermark_blocks = 2;
  Scheduler scheduler(o);
  scheduler.add_request("a", std::vector<int32_t>(24, 1), SamplingParams{});  // 6 blocks: fits alone
  scheduler.add_request("b", std::vector<int32_t>(4, 1), SamplingParams{});   // 1 block: 8-6-1 < 2
  SchedulerOutput out = scheduler.schedule();
  ASSERT_EQ(out.seqs.size(), 1u);
  EXPECT_EQ(scheduler.waiting().size(), 1u);
}

TEST(SchedulerFinishTest, MetricsCountTokensStepsAndRequestEvents) {
  Scheduler scheduler(options());
  SamplingParams params;
  params.max_tokens = 3;
  const SeqId a = scheduler.add_request("a", std::vector<int32_t>(6, 1), params);
  for (int i = 0; i < 3; ++i) {
    SchedulerOutput out = scheduler.schedule();
    scheduler.process(answer(out, 5));
  }
  const MetricsTotals& totals = scheduler.metrics().totals();
  EXPECT_EQ(totals.num_steps, 3);
  EXPECT_EQ(totals.num_prefill_steps, 1);
  EXPECT_EQ(totals.num_decode_steps, 2);
  EXPECT_EQ(totals.num_prefill_tokens, 6);
  EXPECT_EQ(totals.num_decode_tokens, 2);
  EXPECT_EQ(totals.num_committed_tokens, 3);
  EXPECT_EQ(totals.peak_used_blocks, 2);
  EXPECT_EQ(totals.peak_used_slots, 1);
  EXPECT_EQ(totals.finished(FinishReason::kLength), 1);
  EXPECT_EQ(scheduler.metrics().last_step().step, 2);
  EXPECT_EQ(scheduler.metrics().last_step().kind, StepKind::kDecode);
  auto finished = scheduler.take_finished();
  ASSERT_EQ(finished.size(), 1u);
  const RequestMetrics& m = finished[0]->metrics();
  EXPECT_EQ(finished[0]->id(), a);
  EXPECT_EQ(m.arrival_step, 0);
  EXPECT_EQ(m.first_scheduled_step, 0);
  EXPECT_EQ(m.first_token_step, 0);
  EXPECT_EQ(m.finish_step, 2);
  EXPECT_EQ(m.num_prefill_chunks, 1);
  EXPECT_EQ(m.num_prefill_tokens, 6);
  EXPECT_EQ(m.num_preemptions, 0);
}

}  // namespace
}  // namespace deepinfer::engine
