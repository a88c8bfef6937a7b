// The sampler draws from the right distribution: Pearson chi-square goodness of fit over many
// positions (and many seeds) at several temperatures and after top-k / top-p / min-p
// truncation. Seeds are fixed, so the outcome is fixed: the threshold (upper tail 1e-6) leaves
// a wide margin for these seeds, and the negative controls show the same test rejects a
// slightly wrong distribution and a plausibly wrong sampler.

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "engine/sampler.h"
#include "engine/sampler_ops.h"
#include "engine/sampling_batch.h"

namespace deepinfer::engine {
namespace {

constexpr int64_t kDraws = 100000;
const std::vector<double> kLogits = {2.0, 1.5, 1.2, 1.0, 0.7, 0.5, 0.2, 0.0, -0.3, -0.8, -1.5, -2.5};

struct Case {
  float temperature;
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
};

// The target distribution, computed independently in double: softmax(l / T), then top-k, then
// top-p over the renormalized top-k mass, then min-p; renormalized. Asserts that no cut is
// within 1e-3 of a boundary, so float rounding inside the sampler cannot move it.
std::vector<double> expected_distribution(const Case& c) {
  const size_t v = kLogits.size();
  std::vector<double> p(v);
  const double t = c.temperature;
  for (size_t i = 0; i < v; ++i) p[i] = std::exp(kLogits[i] / t);
  std::vector<size_t> order(v);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
  std::vector<bool> keep(v, true);
  if (c.top_k > 0) {
    for (size_t r = static_cast<size_t>(c.top_k); r < v; ++r) keep[order[r]] = false;
  }
  double kept_mass = 0.0;
  for (size_t i = 0; i < v; ++i) kept_mass += keep[i] ? p[i] : 0.0;
  if (c.top_p < 1.0f) {
    double before = 0.0;
    for (size_t r = 0; r < v; ++r) {
      const size_t i = order[r];
      if (!keep[i]) continue;
      const double fraction = before / kept_mass;
      EXPECT_GT(std::abs(fraction - c.top_p), 1e-3) << "top-p cut too close to call";
      if (fraction >= c.top_p) keep[i] = false;
      before += p[i];
    }
  }
  if (c.min_p > 0.0f) {
    for (size_t i = 0; i < v; ++i) {
      EXPECT_GT(std::abs(p[i] / p[order[0]] - c.min_p), 1e-3) << "min-p cut too close to call";
      if (p[i] < c.min_p * p[order[0]]) keep[i] = false;
    }
  }
  double total = 0.0;
  for (size_t i = 0; i < v; ++i) total += keep[i] ? p[i] : 0.0;
  for (size_t i = 0; i < v; ++i) p[i] = keep[i] ? p[i] / total : 0.0;
  return p;
}

// Pearson's statistic over the categories with expected probability > 0.
double chi_square(const std::vector<int64_t>& counts, const std::vector<double>& probs) {
  const double n = static_cast<double>(std::accumulate(counts.begin(), counts.end(), int64_t{0}));
  double stat = 0.0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (probs[i] <= 0.0) continue;
    const double e = n * probs[i];
    stat += (counts[i] - e) * (counts[i] - e) / e;
  }
  return stat;
}

int degrees_of_freedom(const std::vector<double>& probs) {
  return static_cast<int>(std::count_if(probs.begin(), probs.end(), [](double x) { return x > 0; })) - 1;
}

// Upper-tail 1e-6 critical value (Wilson-Hilferty; slightly conservative for small dof).
double critical_value(int dof) {
  const double k = dof;
  const double z = 4.7534;  // standard normal upper 1e-6 quantile
  return k * std::pow(1.0 - 2.0 / (9.0 * k) + z * std::sqrt(2.0 / (9.0 * k)), 3.0);
}

// kDraws draws of one logits row: either over positions 0.. with one seed, or over seeds.
std::vector<int64_t> draw_counts(const Case& c, bool over_seeds) {
  const auto v = static_cast<int64_t>(kLogits.size());
  at::Tensor row = at::empty({1, v});
  for (int64_t i = 0; i < v; ++i) row[0][i] = static_cast<float>(kLogits[i]);
  std::vector<SamplingRow> rows(kDraws);
  for (int64_t d = 0; d < kDraws; ++d) {
    rows[d].temperature = c.temperature;
    rows[d].top_k = c.top_k;
    rows[d].top_p = c.top_p;
    rows[d].min_p = c.min_p;
    rows[d].seed = over_seeds ? static_cast<uint64_t>(d) : 0x5eedULL;
    rows[d].position = over_seeds ? 17 : d;
  }
  const at::Tensor tokens = sample(row.expand({kDraws, v}), SamplingBatch::from_rows(rows, v)).tokens;
  const at::Tensor counts = at::bincount(tokens, /*weights=*/{}, /*minlength=*/v);
  return {counts.data_ptr<int64_t>(), counts.data_ptr<int64_t>() + v};
}

TEST(SamplerStats, ChiSquareHelperRejectsAWrongDistribution) {
  // 20000 fair draws over 4 categories tested against a 10%-off distribution.
  const std::vector<int64_t> counts = {5000, 5000, 5000, 5000};
  EXPECT_LT(chi_square(counts, {0.25, 0.25, 0.25, 0.25}), critical_value(3));
  EXPECT_GT(chi_square(counts, {0.275, 0.225, 0.25, 0.25}), critical_value(3));
}

TEST(SamplerStats, DrawsFollowTheTargetDistributionAtEveryTemperatureAndFilter) {
  const std::vector<Case> cases = {
      {.temperature = 0.5f},
      {.temperature = 1.0f},
      {.temperature = 2.0f},
      {.temperature = 1.0f, .top_k = 5},
      {.temperature = 0.8f, .top_p = 0.8f},
      {.temperature = 1.2f, .min_p = 0.2f},
      {.temperature = 1.5f, .top_k = 8, .top_p = 0.9f},
  };
  for (const Case& c : cases) {
    const std::vector<double> probs = expected_distribution(c);
    const int dof = degrees_of_freedom(probs);
    ASSERT_GE(dof, 3);
    for (bool over_seeds : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "T=" << c.temperature << " top_k=" << c.top_k << " top_p=" << c.top_p << " min_p=" << c.min_p
                                        << (over_seeds ? " over seeds" : " over positions"));
      const std::vector<int64_t> counts = draw_counts(c, over_seeds);
      for (size_t i = 0; i < probs.size(); ++i) {
        if (probs[i] == 0.0) {
          EXPECT_EQ(counts[i], 0) << "truncated token " << i << " was drawn";
        }
      }
      const double stat = chi_square(counts, probs);
      EXPECT_LT(stat, critical_value(dof)) << "dof " << dof;
      // Negative control: the same draws against the distribution of a 10% higher temperature.
      Case off = c;
      off.temperature *= 1.1f;
      const double off_stat = chi_square(counts, expected_distribution(off));
      EXPECT_GT(off_stat, critical_value(dof)) << "the test cannot tell T from 1.1 T";
    }
  }
}

// A plausible bug: exponential noise -log(u) instead of Gumbel -log(-log(u)). The test must
// reject it.
TEST(SamplerStats, RejectsASamplerWithTheWrongNoise) {
  const Case c{.temperature = 1.0f};
  const auto v = static_cast<int64_t>(kLogits.size());
  at::Tensor logits = at::empty({kDraws, v});
  for (int64_t i = 0; i < v; ++i) logits.select(1, i).fill_(static_cast<float>(kLogits[i]));
  const at::Tensor keys = mix_seed(at::full({kDraws}, 0x5eed, at::kLong), at::arange(kDraws, at::kLong));
  const at::Tensor u = at::bitwise_right_shift(noise_bits(keys, v), 9).to(at::kFloat).add_(0.5f).mul_(0x1p-23f);
  const at::Tensor wrong = logits + exact_log(u).neg_();
  const at::Tensor counts = at::bincount(wrong.argmax(1), {}, v);
  const std::vector<int64_t> count_vector(counts.data_ptr<int64_t>(), counts.data_ptr<int64_t>() + v);
  const std::vector<double> probs = expected_distribution(c);
  EXPECT_GT(chi_square(count_vector, probs), critical_value(degrees_of_freedom(probs)));
}

}  // namespace
}  // namespace deepinfer::engine
