// The noise specification (engine/sampler_noise.h) against independent known answers, and the
// tensor path (engine/sampler_ops.h) against the scalar specification, bit for bit.

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <set>
#include <vector>

#include "engine/sampler_noise.h"
#include "engine/sampler_ops.h"

namespace deepinfer::engine {
namespace {

// Known answers computed by an independent Python implementation of the same definitions.
TEST(SamplerNoise, KnownAnswers) {
  EXPECT_EQ(hash32(0), 0u);
  EXPECT_EQ(hash32(1), 0x688990c0u);
  EXPECT_EQ(hash32(0xdeadbeef), 0xe628c683u);
  EXPECT_EQ(hash32(0xffffffff), 0x6768824au);
  EXPECT_EQ(mix_seed(0, 0), 0x51c8885841f39e5eULL);
  EXPECT_EQ(mix_seed(42, 7), 0xd28c437e7b307ddfULL);
  EXPECT_EQ(mix_seed(0xffffffffffffffffULL, uint64_t{1} << 40), 0x72ccb018975ddd1aULL);
  EXPECT_EQ(noise_bits(mix_seed(42, 7), 0), 0xc34b76e2u);
  EXPECT_EQ(noise_bits(mix_seed(42, 7), 129279), 0x77bc6b06u);
  EXPECT_EQ(derive_request_seed(0, ""), 0xaebe53f85cdc3c4cULL);
  EXPECT_EQ(derive_request_seed(1234, "req-0"), 0x5195d607eeae203dULL);
}

TEST(SamplerNoise, DerivedSeedsDependOnJobSeedAndId) {
  EXPECT_NE(derive_request_seed(1, "a"), derive_request_seed(2, "a"));
  EXPECT_NE(derive_request_seed(1, "a"), derive_request_seed(1, "b"));
  EXPECT_NE(derive_request_seed(1, "ab"), derive_request_seed(1, "ba"));
  EXPECT_EQ(derive_request_seed(7, "same"), derive_request_seed(7, "same"));
}

TEST(SamplerNoise, PositionsOfOneSequenceNeverShareAKey) {
  for (uint64_t seed : {uint64_t{0}, uint64_t{12345}, ~uint64_t{0}}) {
    std::set<uint32_t> low_lanes;
    for (uint64_t p = 0; p < 100000; ++p) low_lanes.insert(static_cast<uint32_t>(mix_seed(seed, p)));
    EXPECT_EQ(low_lanes.size(), 100000u) << "seed " << seed;
  }
}

TEST(SamplerNoise, UniformIsInsideTheOpenInterval) {
  EXPECT_EQ(uniform_from_bits(0), 0x1p-24f);
  EXPECT_EQ(uniform_from_bits(0xffffffffu), 1.0f - 0x1p-24f);
  EXPECT_EQ(uniform_from_bits(0x80000000u), 0.5f + 0x1p-24f);
}

// exact_log and exact_exp are within a few ulp of the true value (double libm as the judge).
TEST(SamplerNoise, ExactLogAndExpAreAccurate) {
  EXPECT_EQ(exact_log(1.0f), 0.0f);
  EXPECT_EQ(exact_exp(0.0f), 1.0f);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-125, 125);
  double worst_log = 0.0;
  for (int i = 0; i < 200000; ++i) {
    const float x = std::ldexp(mantissa(rng), exponent(rng));
    const double truth = std::log(static_cast<double>(x));
    // Error in units of the float spacing at the result (absolute near log = 0).
    const double ulp = std::max(std::abs(truth), 1e-30) * 0x1p-23;
    worst_log = std::max(worst_log, std::abs(exact_log(x) - truth) / std::max(ulp, 0x1p-149));
  }
  double worst_exp = 0.0;
  std::uniform_real_distribution<float> arg(kExactExpMin, 0.0f);
  for (int i = 0; i < 200000; ++i) {
    const float x = arg(rng);
    const double truth = std::exp(static_cast<double>(x));
    worst_exp = std::max(worst_exp, std::abs(exact_exp(x) - truth) / (truth * 0x1p-23));
  }
  EXPECT_LT(worst_log, 4.0);
  EXPECT_LT(worst_exp, 4.0);
  // Near 1 the log must keep its relative accuracy (it feeds -log(-log(u)) for u close to 1).
  for (float x : {1.0f - 0x1p-24f, 1.0f - 0x1p-20f, 1.0f + 0x1p-23f}) {
    const double truth = std::log(static_cast<double>(x));
    EXPECT_NEAR(exact_log(x) / truth, 1.0, 1e-6) << x;
  }
}

at::Tensor random_seeds(int64_t n, uint64_t salt) {
  std::mt19937_64 rng(salt);
  at::Tensor t = at::empty({n}, at::kLong);
  for (int64_t i = 0; i < n; ++i) t[i] = static_cast<int64_t>(rng());  // any bit pattern
  return t;
}

TEST(SamplerOps, MixSeedMatchesTheScalarSpecification) {
  const int64_t n = 4096;
  const at::Tensor seed = random_seeds(n, 1);
  at::Tensor position = random_seeds(n, 2).bitwise_and(int64_t{0x7fffffffffff});
  position.narrow(0, 0, 8).copy_(at::arange(8, at::kLong));
  const at::Tensor keys = mix_seed(seed, position);
  ASSERT_EQ(keys.sizes(), (at::IntArrayRef{n, 2}));
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t want = mix_seed(static_cast<uint64_t>(seed[i].item<int64_t>()), static_cast<uint64_t>(position[i].item<int64_t>()));
    ASSERT_EQ(keys[i][0].item<int64_t>(), static_cast<int64_t>(want & 0xffffffffu)) << i;
    ASSERT_EQ(keys[i][1].item<int64_t>(), static_cast<int64_t>(want >> 32)) << i;
  }
}

TEST(SamplerOps, NoiseAndGumbelMatchTheScalarSpecification) {
  const int64_t b = 16, v = 5000;
  const at::Tensor keys = mix_seed(random_seeds(b, 3), at::arange(b, at::kLong).mul_(1000));
  const at::Tensor bits = noise_bits(keys, v);
  const at::Tensor gumbel = gumbel_noise(keys, v);
  ASSERT_EQ(gumbel.scalar_type(), at::kFloat);
  const int64_t* bits_data = bits.data_ptr<int64_t>();
  const float* gumbel_data = gumbel.data_ptr<float>();
  for (int64_t r = 0; r < b; ++r) {
    const uint64_t key = static_cast<uint64_t>(keys[r][1].item<int64_t>()) << 32 | static_cast<uint64_t>(keys[r][0].item<int64_t>());
    for (int64_t t = 0; t < v; ++t) {
      const uint32_t want = noise_bits(key, static_cast<uint32_t>(t));
      ASSERT_EQ(bits_data[r * v + t], static_cast<int64_t>(want)) << r << "," << t;
      ASSERT_EQ(std::bit_cast<uint32_t>(gumbel_data[r * v + t]), std::bit_cast<uint32_t>(gumbel_noise(key, static_cast<uint32_t>(t))))
          << r << "," << t;
    }
  }
}

// Inputs that reach every branch: all exponents, mantissas next to sqrt(1/2), odd tails
// (tensor sizes that are not a multiple of the vector width, strided views).
TEST(SamplerOps, ExactLogAndExpMatchTheScalarSpecification) {
  std::vector<float> log_inputs;
  std::mt19937 rng(9);
  std::uniform_int_distribution<uint32_t> any_bits(0x00800000u, 0x7f7fffffu);  // positive normal
  for (int i = 0; i < 100003; ++i) log_inputs.push_back(std::bit_cast<float>(any_bits(rng)));
  for (int d = -64; d <= 64; ++d) {
    log_inputs.push_back(std::bit_cast<float>(std::bit_cast<uint32_t>(0.70710677f) + d));
    log_inputs.push_back(std::bit_cast<float>(std::bit_cast<uint32_t>(1.0f) + d));
  }
  const at::Tensor x = at::tensor(log_inputs);
  const at::Tensor y = exact_log(x);
  const float* y_data = y.data_ptr<float>();
  for (size_t i = 0; i < log_inputs.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(y_data[i]), std::bit_cast<uint32_t>(exact_log(log_inputs[i]))) << log_inputs[i];
  }
  std::vector<float> exp_inputs;
  std::uniform_real_distribution<float> arg(kExactExpMin, 0.0f);
  for (int i = 0; i < 100003; ++i) exp_inputs.push_back(arg(rng));
  exp_inputs.push_back(kExactExpMin);
  exp_inputs.push_back(0.0f);
  exp_inputs.push_back(-0.0f);
  const at::Tensor e = exact_exp(at::tensor(exp_inputs).view({-1, 1}).expand({-1, 2}).select(1, 1));
  const at::Tensor e_dense = e.contiguous();
  const float* e_data = e_dense.data_ptr<float>();
  for (size_t i = 0; i < exp_inputs.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(e_data[i]), std::bit_cast<uint32_t>(exact_exp(exp_inputs[i]))) << exp_inputs[i];
  }
}

// The Gumbel noise has the right law: mean = Euler's gamma, variance = pi^2 / 6, and
// P(G <= 0) = 1/e. 1M draws over 100 positions; the tolerances are > 6 standard errors.
TEST(SamplerOps, GumbelMomentsMatchTheLaw) {
  const at::Tensor keys = mix_seed(at::full({100}, 77, at::kLong), at::arange(100, at::kLong));
  const at::Tensor g = gumbel_noise(keys, 10000).to(at::kDouble);
  const double mean = g.mean().item<double>();
  const double var = g.var().item<double>();
  const double below_zero = g.le(0).to(at::kDouble).mean().item<double>();
  EXPECT_NEAR(mean, std::numbers::egamma, 0.008);
  EXPECT_NEAR(var, std::numbers::pi * std::numbers::pi / 6.0, 0.02);
  EXPECT_NEAR(below_zero, std::exp(-1.0), 0.003);
  EXPECT_GT(g.max().item<double>(), 10.0);  // the upper tail is reached, not clipped early
}

}  // namespace
}  // namespace deepinfer::engine
