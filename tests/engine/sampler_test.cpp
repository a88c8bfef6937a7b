// sample(): greedy and tie rules, randomness, filters, masks, logprobs, argument errors.
// Batch invariance is in sampler_invariance_test.cpp.

#include "engine/sampler.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "engine/sampling_batch.h"
#include "tests/engine/sampler_test_util.h"

namespace deepinfer::engine {
namespace {

using sampler_testing::random_logits;
using sampler_testing::run;
using sampler_testing::to_vector;
using sampler_testing::varied_rows;

constexpr int64_t kVocab = 1000;
constexpr float kInf = std::numeric_limits<float>::infinity();

SamplingBatch one_row(const SamplingRow& row, int64_t vocab_size) {
  return SamplingBatch::from_rows(std::vector<SamplingRow>{row}, vocab_size);
}

// Logits whose softmax at temperature 1 is `probs` (up to float rounding).
at::Tensor logits_for(const std::vector<double>& probs) {
  at::Tensor l = at::empty({1, static_cast<int64_t>(probs.size())}, at::kFloat);
  for (size_t i = 0; i < probs.size(); ++i) l[0][static_cast<int64_t>(i)] = std::log(probs[i]);
  return l;
}

// The set of tokens sampled over `n` positions of one row.
std::set<int64_t> tokens_over_positions(const at::Tensor& row_logits, SamplingRow row, int64_t n) {
  std::vector<SamplingRow> rows;
  for (int64_t p = 0; p < n; ++p) {
    row.position = p;
    rows.push_back(row);
  }
  const std::vector<int64_t> tokens = to_vector(run(row_logits.expand({n, -1}), rows).tokens);
  return {tokens.begin(), tokens.end()};
}

std::set<int64_t> mask_ids(const at::Tensor& mask_row) {
  std::set<int64_t> ids;
  for (int64_t id : to_vector(mask_row.nonzero().view({-1}))) ids.insert(id);
  return ids;
}

TEST(SamplerGreedy, ArgmaxTakesTheLowestIdOnTies) {
  // at::argmax itself (CPU here; CUDA documents first occurrence) on a long row split across
  // threads: the tied maxima at 70001, 150000 and 199999 resolve to 70001.
  at::Tensor wide = at::zeros({1, 200000});
  for (int64_t id : {199999, 150000, 70001}) wide[0][id] = 5.0f;
  EXPECT_EQ(wide.argmax(1).item<int64_t>(), 70001);
  SamplingRow greedy;
  greedy.temperature = 0.0f;
  EXPECT_EQ(run(wide, {greedy}).tokens.item<int64_t>(), 70001);
  const at::Tensor small = at::tensor({1.0f, 9.0f, 3.0f, 9.0f, 9.0f}).view({1, 5});
  EXPECT_EQ(run(small, {greedy}).tokens.item<int64_t>(), 1);
}

TEST(SamplerGreedy, GreedyRowsIgnoreSeedAndPositionInAMixedBatch) {
  const at::Tensor logits = random_logits(1, kVocab, 7).expand({40, -1});
  std::vector<SamplingRow> rows(40);
  for (int64_t i = 0; i < 40; ++i) {
    rows[i].temperature = i % 2 == 0 ? 0.0f : 5.0f;
    rows[i].seed = static_cast<uint64_t>(i) * 1000003;
    rows[i].position = i;
  }
  const std::vector<int64_t> tokens = to_vector(run(logits, rows).tokens);
  const int64_t argmax = logits[0].argmax().item<int64_t>();
  std::set<int64_t> random_tokens;
  for (int64_t i = 0; i < 40; ++i) {
    if (i % 2 == 0)
      EXPECT_EQ(tokens[i], argmax) << i;
    else
      random_tokens.insert(tokens[i]);
  }
  EXPECT_GT(random_tokens.size(), 10u);  // hot temperature, 20 draws: the noise is live
}

TEST(SamplerRandom, SameSeedAndPositionResampleTheSameTokenAndOthersDiffer) {
  const at::Tensor logits = at::zeros({1, kVocab});  // uniform: the token is the noise's argmax
  SamplingRow row;
  std::set<int64_t> over_positions = tokens_over_positions(logits, row, 200);
  EXPECT_GT(over_positions.size(), 150u);
  row.position = 5;
  const int64_t first = run(logits, {row}).tokens.item<int64_t>();
  EXPECT_EQ(run(logits, {row}).tokens.item<int64_t>(), first);
  std::set<int64_t> over_seeds;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    row.seed = seed;
    over_seeds.insert(run(logits, {row}).tokens.item<int64_t>());
  }
  EXPECT_GT(over_seeds.size(), 150u);
}

TEST(SamplerFilters, TopKKeepsTheKLargestAndEveryTieAtTheKth) {
  const at::Tensor logits = at::tensor({5.0f, 4.0f, 4.0f, 4.0f, 1.0f, 0.0f, 3.0f, 4.0f}).view({1, 8});
  SamplingRow row;
  row.temperature = 5.0f;
  row.top_k = 2;
  const at::Tensor mask = candidate_mask(logits, one_row(row, 8))[0];
  EXPECT_EQ(mask_ids(mask), (std::set<int64_t>{0, 1, 2, 3, 7}));
  EXPECT_EQ(tokens_over_positions(logits, row, 400), (std::set<int64_t>{0, 1, 2, 3, 7}));
  row.top_k = 1;
  EXPECT_EQ(tokens_over_positions(logits, row, 100), (std::set<int64_t>{0}));
  for (int32_t off : {0, -1, 8, 100}) {
    row.top_k = off;
    EXPECT_EQ(mask_ids(candidate_mask(logits, one_row(row, 8))[0]).size(), 8u);
  }
}

TEST(SamplerFilters, TopPKeepsTheNucleusOfTheTopKKeptDistribution) {
  const at::Tensor logits = logits_for({0.5, 0.3, 0.15, 0.05});
  const auto kept = [&](int32_t top_k, float top_p) {
    SamplingRow row;
    row.top_k = top_k;
    row.top_p = top_p;
    return mask_ids(candidate_mask(logits, one_row(row, 4))[0]);
  };
  EXPECT_EQ(kept(0, 0.7f), (std::set<int64_t>{0, 1}));      // mass before token 1: 0.5 < 0.7
  EXPECT_EQ(kept(0, 0.81f), (std::set<int64_t>{0, 1, 2}));  // before token 2: 0.8 < 0.81
  EXPECT_EQ(kept(0, 1e-6f), (std::set<int64_t>{0}));        // the top token always stays
  EXPECT_EQ(kept(0, 1.0f), (std::set<int64_t>{0, 1, 2, 3}));
  // After top-k = 2 the masses renormalize to 0.625 / 0.375: top_p 0.6 keeps token 0 alone
  // (over the full distribution it would keep {0, 1}).
  EXPECT_EQ(kept(2, 0.6f), (std::set<int64_t>{0}));
  EXPECT_EQ(kept(2, 0.7f), (std::set<int64_t>{0, 1}));
  SamplingRow row;
  row.top_p = 0.7f;
  EXPECT_EQ(tokens_over_positions(logits, row, 300), (std::set<int64_t>{0, 1}));
}

TEST(SamplerFilters, MinPKeepsTokensAboveAFractionOfTheTopProbability) {
  const at::Tensor logits = logits_for({0.5, 0.3, 0.15, 0.05});
  SamplingRow row;
  row.min_p = 0.25f;  // keep p >= 0.125
  EXPECT_EQ(mask_ids(candidate_mask(logits, one_row(row, 4))[0]), (std::set<int64_t>{0, 1, 2}));
  row.min_p = 1.0f;
  EXPECT_EQ(tokens_over_positions(logits, row, 100), (std::set<int64_t>{0}));
  // Temperature flattens the distribution before min-p: at T = 4, p3 / p0 = 0.1^(1/4) = 0.56.
  row.min_p = 0.5f;
  row.temperature = 4.0f;
  EXPECT_EQ(mask_ids(candidate_mask(logits, one_row(row, 4))[0]), (std::set<int64_t>{0, 1, 2, 3}));
}

TEST(SamplerMasks, LogitBiasBansAndForcesTokens) {
  const at::Tensor logits = at::zeros({1, 50});
  SamplingRow row;
  row.logit_bias = {{10, -kInf}, {11, -kInf}};
  const std::set<int64_t> seen = tokens_over_positions(logits, row, 500);
  EXPECT_FALSE(seen.count(10) || seen.count(11));
  EXPECT_EQ(seen.size(), 48u);
  row.logit_bias = {{33, 30.0f}, {33, 20.0f}, {34, 30.0f}};  // 33 sums to 50: 20 above 34
  EXPECT_EQ(tokens_over_positions(logits, row, 50), (std::set<int64_t>{33}));
  row.logit_bias.clear();
  for (int64_t t = 0; t < 50; ++t) row.logit_bias.push_back({t, -kInf});
  EXPECT_EQ(run(logits, {row}).tokens.item<int64_t>(), -1);  // nothing left to sample
  row.temperature = 0.0f;
  const SampleResult none = run(logits, {row}, 0);
  EXPECT_EQ(none.tokens.item<int64_t>(), -1);
  EXPECT_EQ(none.logprobs.item<float>(), -kInf);
}

TEST(SamplerMasks, MinTokensSuppressesStopIdsOnlyWhileAsked) {
  // Stop ids 0 and 9 dominate the logits: suppressed, the row samples among the rest.
  at::Tensor logits = at::zeros({1, 10});
  logits[0][0] = 20.0f;
  logits[0][9] = 20.0f;
  SamplingRow row;
  row.stop_ids = {9, 0};
  row.suppress_stop = true;
  const std::set<int64_t> seen = tokens_over_positions(logits, row, 300);
  EXPECT_EQ(seen, (std::set<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  row.suppress_stop = false;
  EXPECT_EQ(tokens_over_positions(logits, row, 100), (std::set<int64_t>{0, 9}));
  // Padding (-1) of a shorter row next to a longer one bans nothing, token 0 included.
  SamplingRow other = row;
  other.stop_ids = {5};
  other.suppress_stop = true;
  const SamplingBatch batch = SamplingBatch::from_rows(std::vector<SamplingRow>{other, row}, 10);
  EXPECT_EQ(batch.stop_ids.size(1), 2);
  const at::Tensor mask = candidate_mask(logits.expand({2, -1}), batch);
  EXPECT_EQ(mask_ids(mask[0]).count(5), 0u);
  EXPECT_EQ(mask_ids(mask[0]).count(0), 1u);
  EXPECT_EQ(mask_ids(mask[1]).size(), 10u);
}

TEST(SamplerLogprobs, MatchTheLogSoftmaxOfTheRawLogits) {
  const at::Tensor logits = random_logits(12, kVocab, 8);
  std::vector<SamplingRow> rows = varied_rows(12, kVocab);
  for (SamplingRow& r : rows) r.logprobs = 5;
  const SampleResult out = run(logits, rows);
  const at::Tensor reference = at::log_softmax(logits.to(at::kDouble), 1);
  const at::Tensor chosen = reference.gather(1, out.tokens.unsqueeze(1)).squeeze(1);
  EXPECT_LT((out.logprobs.to(at::kDouble) - chosen).abs().max().item<double>(), 2e-5);
  auto [values, ids] = at::sort(logits, /*stable=*/true, 1, /*descending=*/true);
  EXPECT_TRUE(at::equal(out.top_ids, ids.narrow(1, 0, 5)));
  const at::Tensor top_reference = reference.gather(1, out.top_ids);
  EXPECT_LT((out.top_logprobs.to(at::kDouble) - top_reference).abs().max().item<double>(), 2e-5);
  // Logprobs ignore bias and temperature: row 5 has a +3 bias on token 1 and T = 0.9.
  EXPECT_NEAR(out.top_logprobs[5][0].item<float>(), reference[5].max().item<double>(), 2e-5);
}

TEST(SamplerLogprobs, TopIdsPutEqualLogprobsInIdOrder) {
  const at::Tensor logits = at::tensor({3.0f, 7.0f, 7.0f, 1.0f, 7.0f, 3.0f}).view({1, 6});
  SamplingRow row;
  row.logprobs = 6;
  const SampleResult out = run(logits, {row});
  EXPECT_EQ(to_vector(out.top_ids[0]), (std::vector<int64_t>{1, 2, 4, 0, 5, 3}));
  EXPECT_EQ(out.top_logprobs[0][0].item<float>(), out.top_logprobs[0][2].item<float>());
}

TEST(SamplerArgs, BadRowsThrowNamingTheValue) {
  const auto error_of = [](SamplingRow row) -> std::string {
    try {
      one_row(row, 100);
    } catch (const c10::Error& e) {
      return e.what_without_backtrace();
    }
    return "";
  };
  SamplingRow r;
  r.temperature = -0.5f;
  EXPECT_NE(error_of(r).find("-0.5"), std::string::npos);
  r = {};
  r.top_p = 0.0f;
  EXPECT_NE(error_of(r).find("top_p"), std::string::npos);
  r = {};
  r.min_p = 1.5f;
  EXPECT_NE(error_of(r).find("1.5"), std::string::npos);
  r = {};
  r.stop_ids = {100};
  EXPECT_NE(error_of(r).find("stop id 100"), std::string::npos);
  r = {};
  r.logit_bias = {{3, kInf}};
  EXPECT_NE(error_of(r).find("logit_bias"), std::string::npos);
  r = {};
  r.position = -1;
  EXPECT_NE(error_of(r).find("position"), std::string::npos);
  EXPECT_EQ(error_of(SamplingRow{}), "");
}

TEST(SamplerArgs, BadInputsThrowAndAnEmptyBatchWorks) {
  const SamplingBatch two = SamplingBatch::from_rows(varied_rows(2, 10), 10);
  EXPECT_THROW(sample(at::zeros({3, 10}), two), c10::Error);
  EXPECT_THROW(sample(at::zeros({20}), two), c10::Error);
  EXPECT_THROW(sample(at::zeros({2, 10}, at::kDouble), two), c10::Error);
  SamplingBatch wrong_type = two;
  wrong_type.top_k = wrong_type.top_k.to(at::kInt);
  EXPECT_THROW(sample(at::zeros({2, 10}), wrong_type), c10::Error);
  const SamplingBatch empty = SamplingBatch::from_rows({}, 10);
  EXPECT_EQ(empty.size(), 0);
  EXPECT_EQ(sample(at::zeros({0, 10}), empty).tokens.numel(), 0);
}

}  // namespace
}  // namespace deepinfer::engine
