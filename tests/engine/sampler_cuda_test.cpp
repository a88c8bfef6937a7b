// CPU == CUDA, bit for bit, and batch invariance on CUDA. Label cuda: every test skips with a
// message when no GPU is visible (it never passes silently).

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "engine/sampler.h"
#include "engine/sampler_noise.h"
#include "engine/sampler_ops.h"
#include "engine/sampling_batch.h"
#include "tests/engine/sampler_test_util.h"

namespace deepinfer::engine {
namespace {

using sampler_testing::bitwise_equal;
using sampler_testing::expect_same_result;
using sampler_testing::random_logits;
using sampler_testing::row_of;
using sampler_testing::varied_rows;

#define SKIP_WITHOUT_CUDA()                                                       \
  do {                                                                            \
    if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: CPU == CUDA unverified"; \
  } while (0)

const at::Device kCuda(at::kCUDA, 0);

TEST(SamplerCuda, ExactMathAndNoiseMatchTheCpuBitForBit) {
  SKIP_WITHOUT_CUDA();
  const at::Tensor positive = at::rand({1 << 20}).add_(1e-6f).mul_(at::rand({1 << 20}).mul_(40).sub_(20).exp_());
  EXPECT_TRUE(bitwise_equal(exact_log(positive), exact_log(positive.to(kCuda))));
  const at::Tensor nonpositive = at::rand({1 << 20}).mul_(kExactExpMin);
  EXPECT_TRUE(bitwise_equal(exact_exp(nonpositive), exact_exp(nonpositive.to(kCuda))));
  const at::Tensor seed = at::randint(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), {64}, at::kLong);
  const at::Tensor position = at::randint(0, int64_t{1} << 40, {64}, at::kLong);
  const at::Tensor keys = mix_seed(seed, position);
  EXPECT_TRUE(bitwise_equal(keys, mix_seed(seed.to(kCuda), position.to(kCuda))));
  EXPECT_TRUE(bitwise_equal(gumbel_noise(keys, 129280, NoiseKernel::kAten), gumbel_noise(keys.to(kCuda), 129280, NoiseKernel::kAten)));
}

// The fused noise kernel (sample()'s default on CUDA) against the CPU reference path.
TEST(SamplerCuda, FusedNoiseKernelMatchesTheCpuBitForBit) {
  SKIP_WITHOUT_CUDA();
  const at::Tensor seed = at::randint(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), {64}, at::kLong);
  const at::Tensor position = at::randint(0, int64_t{1} << 40, {64}, at::kLong);
  const at::Tensor keys = mix_seed(seed, position);
  const at::Tensor cpu = gumbel_noise(keys, 129280, NoiseKernel::kAten);
  const at::Tensor fused = gumbel_noise(keys.to(kCuda), 129280, NoiseKernel::kFused);
  EXPECT_TRUE(bitwise_equal(cpu, fused));
}

// The done-when check: identical logits give the same tokens (and logprobs) on CPU and CUDA,
// at the real vocabulary size, for float32 and bfloat16 logits, with every parameter mixed.
TEST(SamplerCuda, SampleMatchesTheCpuBitForBit) {
  SKIP_WITHOUT_CUDA();
  constexpr int64_t kVocab = 129280;
  std::vector<SamplingRow> rows = varied_rows(64, kVocab);
  for (size_t i = 0; i < rows.size(); ++i) rows[i].logprobs = i % 4 == 0 ? 20 : -1;
  const SamplingBatch batch = SamplingBatch::from_rows(rows, kVocab);
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    SCOPED_TRACE(dtype);
    at::Tensor logits = random_logits(64, kVocab, 11);
    for (int64_t row : {0, 4, 8}) {  // tied maxima: greedy and top_ids must pick the lowest ids
      for (int64_t id : {100000, 7, 3}) logits[row][id] = 50.0f;
    }
    logits = logits.to(dtype);
    const SampleResult cpu = sample(logits, batch);
    const SampleResult cuda = sample(logits.to(kCuda), batch.to(kCuda));
    EXPECT_EQ(cuda.tokens.device(), kCuda);
    expect_same_result(cpu, cuda);
    EXPECT_EQ(cpu.tokens[0].item<int64_t>(), 3);  // row 0 is greedy
    EXPECT_EQ(cpu.top_ids[4][0].item<int64_t>(), 3);
    EXPECT_EQ(cpu.top_ids[4][1].item<int64_t>(), 7);
    EXPECT_EQ(cpu.top_ids[4][2].item<int64_t>(), 100000);
  }
}

TEST(SamplerCuda, SingleRowAndReversedOrderMatchTheBatchOnCuda) {
  SKIP_WITHOUT_CUDA();
  constexpr int64_t kVocab = 129280;
  const at::Tensor logits = random_logits(64, kVocab, 12).to(kCuda);
  const std::vector<SamplingRow> rows = varied_rows(64, kVocab);
  const SampleResult full = sample(logits, SamplingBatch::from_rows(rows, kVocab).to(kCuda));
  for (int64_t i : {0, 1, 2, 3, 4, 5, 6, 7, 40, 63}) {
    SCOPED_TRACE(i);
    SamplingBatch one = SamplingBatch::from_rows(std::vector<SamplingRow>{rows[i]}, kVocab).to(kCuda);
    one.num_logprobs = full.top_ids.size(1);
    expect_same_result(row_of(full, i), sample(logits.narrow(0, i, 1), one));
  }
  const std::vector<SamplingRow> reversed(rows.rbegin(), rows.rend());
  const SampleResult back = sample(logits.flip({0}), SamplingBatch::from_rows(reversed, kVocab).to(kCuda));
  EXPECT_TRUE(bitwise_equal(back.tokens.flip({0}), full.tokens));
  EXPECT_TRUE(bitwise_equal(back.logprobs.flip({0}), full.logprobs));
}

}  // namespace
}  // namespace deepinfer::engine
