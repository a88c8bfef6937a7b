// Batch invariance, bitwise: a row's outputs do not depend on the batch size, the row order,
// the other rows (removal, cancellation), preemption and recomputation, the CPU thread count,
// or the host-side hints.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "engine/sampler.h"
#include "engine/sampling_batch.h"
#include "tests/engine/sampler_test_util.h"

namespace deepinfer::engine {
namespace {

using sampler_testing::bitwise_equal;
using sampler_testing::expect_same_result;
using sampler_testing::random_logits;
using sampler_testing::row_of;
using sampler_testing::run;
using sampler_testing::to_vector;
using sampler_testing::varied_rows;

constexpr int64_t kVocab = 1000;

TEST(SamplerInvariance, SingleRowEqualsTheSameRowInA64RowBatch) {
  const at::Tensor logits = random_logits(64, kVocab, 1);
  const std::vector<SamplingRow> rows = varied_rows(64, kVocab);
  const SampleResult full = run(logits, rows);
  ASSERT_EQ(full.top_ids.size(1), 1);
  for (int64_t i = 0; i < 64; ++i) {
    SCOPED_TRACE(i);
    const SampleResult single = run(logits.narrow(0, i, 1), {rows[i]}, full.top_ids.size(1));
    expect_same_result(row_of(full, i), single);
  }
}

TEST(SamplerInvariance, ForwardOrderEqualsReversedAndShuffledOrder) {
  const at::Tensor logits = random_logits(64, kVocab, 2);
  const std::vector<SamplingRow> rows = varied_rows(64, kVocab);
  const SampleResult forward = run(logits, rows);
  std::vector<int64_t> order(64);
  for (int64_t i = 0; i < 64; ++i) order[i] = 63 - i;
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) std::swap_ranges(order.begin(), order.begin() + 20, order.begin() + 30);
    std::vector<SamplingRow> permuted_rows;
    for (int64_t i : order) permuted_rows.push_back(rows[i]);
    const at::Tensor index = at::tensor(order);
    const SampleResult permuted = run(logits.index_select(0, index), permuted_rows);
    const auto pick = [&](const at::Tensor& t) { return t.index_select(0, index); };
    EXPECT_TRUE(bitwise_equal(pick(forward.tokens), permuted.tokens));
    EXPECT_TRUE(bitwise_equal(pick(forward.logprobs), permuted.logprobs));
    EXPECT_TRUE(bitwise_equal(pick(forward.top_ids), permuted.top_ids));
    EXPECT_TRUE(bitwise_equal(pick(forward.top_logprobs), permuted.top_logprobs));
  }
}

TEST(SamplerInvariance, RemovingARowLeavesTheOthersUnchanged) {
  const at::Tensor logits = random_logits(64, kVocab, 3);
  const std::vector<SamplingRow> rows = varied_rows(64, kVocab);
  const SampleResult full = run(logits, rows);
  // from_rows recomputes the hints of the smaller batch; the tokens must not notice.
  for (int64_t removed : {0, 2, 17, 63}) {
    SCOPED_TRACE(removed);
    std::vector<SamplingRow> kept_rows = rows;
    kept_rows.erase(kept_rows.begin() + removed);
    const at::Tensor kept_logits = at::cat({logits.narrow(0, 0, removed), logits.narrow(0, removed + 1, 63 - removed)});
    const SampleResult fewer = run(kept_logits, kept_rows, full.top_ids.size(1));
    const auto drop = [&](const at::Tensor& t) { return at::cat({t.narrow(0, 0, removed), t.narrow(0, removed + 1, 63 - removed)}); };
    EXPECT_TRUE(bitwise_equal(drop(full.tokens), fewer.tokens));
    EXPECT_TRUE(bitwise_equal(drop(full.logprobs), fewer.logprobs));
    EXPECT_TRUE(bitwise_equal(drop(full.top_ids), fewer.top_ids));
  }
}

// A toy decode loop: the next-token logits are a fixed table row of the last token. Run A keeps
// all 8 sequences together. Run B reverses the row order on odd steps, preempts sequence 3 for 8
// steps (it then resumes at its own next position, as after recomputation) and cancels sequence
// 5 at step 10. Every surviving token must match run A.
TEST(SamplerInvariance, PreemptionRecomputeAndCancellationKeepEveryTokenUnchanged) {
  constexpr int64_t kV = 300, kSeqs = 8, kLen = 30;
  const at::Tensor table = random_logits(kV, kV, 4);
  struct Seq {
    SamplingRow row;
    int64_t last;
    int32_t min_tokens;
    std::vector<int64_t> out;
  };
  const auto make = [&] {
    std::vector<Seq> seqs;
    for (int64_t j = 0; j < kSeqs; ++j) {
      SamplingRow row = sampler_testing::varied_row(j, kV);
      row.stop_ids = {kV - 1, 7};
      seqs.push_back({row, (j * 7) % kV, j == 6 ? 12 : 0, {}});
    }
    return seqs;
  };
  const auto step = [&](std::vector<Seq>& seqs, const std::vector<int64_t>& active) {
    std::vector<SamplingRow> rows;
    std::vector<int64_t> last;
    for (int64_t j : active) {
      Seq& s = seqs[j];
      s.row.position = static_cast<int64_t>(s.out.size());
      s.row.suppress_stop = s.row.position < s.min_tokens;
      rows.push_back(s.row);
      last.push_back(s.last);
    }
    const at::Tensor tokens = run(table.index_select(0, at::tensor(last)), rows).tokens;
    const std::vector<int64_t> t = to_vector(tokens);
    for (size_t i = 0; i < active.size(); ++i) {
      seqs[active[i]].out.push_back(t[i]);
      seqs[active[i]].last = t[i];
    }
  };
  std::vector<Seq> a = make();
  for (int64_t g = 0; g < kLen; ++g) step(a, {0, 1, 2, 3, 4, 5, 6, 7});

  std::vector<Seq> b = make();
  for (int64_t g = 0; g < 60; ++g) {
    std::vector<int64_t> active;
    for (int64_t j = 0; j < kSeqs; ++j) {
      const bool preempted = j == 3 && g >= 12 && g < 20;
      const bool cancelled = j == 5 && g >= 10;
      if (!preempted && !cancelled && static_cast<int64_t>(b[j].out.size()) < kLen) active.push_back(j);
    }
    if (active.empty()) break;
    if (g % 2 == 1) std::reverse(active.begin(), active.end());
    step(b, active);
  }
  for (int64_t j = 0; j < kSeqs; ++j) {
    SCOPED_TRACE(j);
    if (j == 5) {
      ASSERT_EQ(b[j].out.size(), 10u);
      EXPECT_TRUE(std::equal(b[j].out.begin(), b[j].out.end(), a[j].out.begin()));
    } else {
      EXPECT_EQ(b[j].out, a[j].out);
    }
  }
  // min_tokens held: sequence 6 produced no stop id in its first 12 tokens.
  for (int64_t i = 0; i < 12; ++i) EXPECT_TRUE(a[6].out[i] != kV - 1 && a[6].out[i] != 7);
}

// On the CPU, ATen splits long reductions across threads (a float sum of one long row changes
// with the thread count). The sampler's reductions are order-independent, so neither the thread
// count nor the batch size may change a bit, at the real vocabulary size.
TEST(SamplerInvariance, ThreadCountDoesNotChangeTheBits) {
  constexpr int64_t kV = 129280;
  const at::Tensor logits = random_logits(8, kV, 9);
  const std::vector<SamplingRow> rows = varied_rows(8, kV);
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const SampleResult one_thread = run(logits, rows);
  at::set_num_threads(4);
  const SampleResult four_threads = run(logits, rows);
  const SampleResult last_row = run(logits.narrow(0, 7, 1), {rows[7]}, one_thread.top_ids.size(1));
  at::set_num_threads(threads);
  expect_same_result(one_thread, four_threads);
  expect_same_result(row_of(one_thread, 7), last_row);
}

TEST(SamplerInvariance, TightHintsGiveTheSameBitsAsConservativeHints) {
  const at::Tensor logits = random_logits(64, kVocab, 5);
  std::vector<SamplingRow> rows = varied_rows(64, kVocab);
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) {
      for (SamplingRow& r : rows) r.top_p = 1.0f;  // no top-p: the topk(max_top_k) path
    }
    const SamplingBatch tight = SamplingBatch::from_rows(rows, kVocab);
    SamplingBatch safe = tight;
    safe.hints = SamplingHints{};
    EXPECT_EQ(tight.hints.max_top_k, 40);
    EXPECT_EQ(tight.hints.any_top_p, pass == 0);
    expect_same_result(sample(logits, tight), sample(logits, safe));
  }
}

TEST(SamplerInvariance, BFloat16LogitsEqualTheirFloat32Values) {
  const at::Tensor logits = random_logits(16, kVocab, 6).to(at::kBFloat16);
  const std::vector<SamplingRow> rows = varied_rows(16, kVocab);
  expect_same_result(run(logits, rows), run(logits.to(at::kFloat), rows));
}

}  // namespace
}  // namespace deepinfer::engine
