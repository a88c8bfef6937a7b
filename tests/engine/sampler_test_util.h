#pragma once
// Shared fixtures for the sampler tests: random logits, a varied set of rows, bitwise compares.

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/sampler.h"
#include "engine/sampling_batch.h"

namespace deepinfer::engine::sampler_testing {

// [b, v] float32 logits from a fixed CPU generator, with a few exact ties per row.
inline at::Tensor random_logits(int64_t b, int64_t v, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::Tensor l = at::randn({b, v}, gen, at::kFloat).mul_(3.0f);
  if (v > 8) l.narrow(1, v / 2, 2).copy_(l.narrow(1, 0, 2));  // equal values inside a row
  return l;
}

// Row i of a varied batch: greedy, plain, top-k, top-p, min-p, bias, suppression, logprobs.
inline SamplingRow varied_row(int64_t i, int64_t v) {
  SamplingRow r;
  r.seed = 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(i + 1);  // some seeds >= 2^63
  r.position = (i * 37) % 101;
  switch (i % 8) {
    case 0: r.temperature = 0.0f; break;
    case 1: r.temperature = 1.0f; break;
    case 2:
      r.temperature = 0.7f;
      r.top_k = 5 + static_cast<int32_t>(i % 11);
      break;
    case 3:
      r.temperature = 1.3f;
      r.top_p = 0.9f;
      break;
    case 4:
      r.temperature = 1.0f;
      r.min_p = 0.05f;
      r.top_k = 40;
      break;
    case 5:
      r.temperature = 0.9f;
      r.top_p = 0.5f;
      r.logit_bias = {{1, 2.5f}, {3, -std::numeric_limits<float>::infinity()}, {1, 0.5f}};
      break;
    case 6:
      r.temperature = 1.1f;
      r.suppress_stop = true;
      r.stop_ids = {0, v - 1, 2};
      break;
    case 7:
      r.temperature = 0.0f;
      r.top_k = 3;
      r.logit_bias = {{v / 3, 100.0f}};
      break;
  }
  r.logprobs = static_cast<int32_t>(i % 3) - 1;  // -1, 0, 1
  return r;
}

inline std::vector<SamplingRow> varied_rows(int64_t b, int64_t v) {
  std::vector<SamplingRow> rows;
  for (int64_t i = 0; i < b; ++i) rows.push_back(varied_row(i, v));
  return rows;
}

// Bitwise equality: same dtype, shape and bytes (NaN-safe, -0 != +0).
inline bool bitwise_equal(const at::Tensor& a, const at::Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  const at::Tensor x = a.cpu().contiguous();
  const at::Tensor y = b.cpu().contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

inline void expect_same_result(const SampleResult& a, const SampleResult& b) {
  EXPECT_TRUE(bitwise_equal(a.tokens, b.tokens)) << a.tokens << b.tokens;
  EXPECT_TRUE(bitwise_equal(a.logprobs, b.logprobs));
  EXPECT_TRUE(bitwise_equal(a.top_logprobs, b.top_logprobs));
  EXPECT_TRUE(bitwise_equal(a.top_ids, b.top_ids));
}

// Row `i` of a result as a one-row result (for comparing a batch row with a single-row run).
inline SampleResult row_of(const SampleResult& r, int64_t i) {
  const auto pick = [&](const at::Tensor& t) { return t.defined() ? t.narrow(0, i, 1) : t; };
  return {pick(r.tokens), pick(r.logprobs), pick(r.top_logprobs), pick(r.top_ids)};
}

// Samples `rows`; num_logprobs overrides the batch's when >= -1 (to compare differently sized
// batches, whose default N is the max over their own rows).
inline SampleResult run(const at::Tensor& logits, const std::vector<SamplingRow>& rows, int32_t num_logprobs = -2) {
  SamplingBatch batch = SamplingBatch::from_rows(rows, logits.size(1));
  if (num_logprobs >= -1) batch.num_logprobs = num_logprobs;
  return sample(logits, batch);
}

inline std::vector<int64_t> to_vector(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kLong).contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

}  // namespace deepinfer::engine::sampler_testing
