#include "engine/sampling_params.h"

#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>
#include <string>

namespace deepinfer::engine {
namespace {

TEST(SamplingParamsTest, DefaultsAreValid) {
  SamplingParams params;
  EXPECT_EQ(params.validation_error(), "");
  EXPECT_NO_THROW(params.validate());
}

TEST(SamplingParamsTest, EachBadFieldIsNamedWithItsValue) {
  struct Case {
    std::function<void(SamplingParams&)> mutate;
    std::string expected;  // substring of the message
  };
  const Case cases[] = {
      {[](SamplingParams& p) { p.max_tokens = 0; }, "max_tokens must be >= 1, got 0"},
      {[](SamplingParams& p) { p.temperature = -0.5f; }, "temperature must be finite and >= 0, got -0.5"},
      {[](SamplingParams& p) { p.temperature = std::numeric_limits<float>::quiet_NaN(); }, "temperature"},
      {[](SamplingParams& p) { p.top_p = 0.0f; }, "top_p must be in (0, 1], got 0"},
      {[](SamplingParams& p) { p.top_p = 1.5f; }, "top_p must be in (0, 1], got 1.5"},
      {[](SamplingParams& p) { p.top_k = -2; }, "top_k must be -1 or 0 (off) or >= 1, got -2"},
      {[](SamplingParams& p) { p.min_p = 2.0f; }, "min_p must be in [0, 1], got 2"},
      {[](SamplingParams& p) {
         p.stop_token_ids = {3, -7};
       },
       "stop_token_ids must be >= 0, got -7"},
      {[](SamplingParams& p) { p.min_tokens = 17; }, "min_tokens must be in [0, max_tokens=16], got 17"},
      {[](SamplingParams& p) { p.logprobs = 21; }, "logprobs must be -1 (none) or in [0, 20], got 21"},
      {[](SamplingParams& p) { p.prompt_logprobs = -2; }, "prompt_logprobs must be -1 (none) or in [0, 20], got -2"},
  };
  for (const Case& c : cases) {
    SamplingParams params;
    c.mutate(params);
    const std::string error = params.validation_error();
    EXPECT_NE(error.find(c.expected), std::string::npos) << "message: " << error << "\nexpected: " << c.expected;
    EXPECT_THROW(params.validate(), std::invalid_argument);
  }
}

TEST(SamplingParamsTest, BoundaryValuesAreValid) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.top_p = 1.0f;
  params.top_k = -1;
  params.min_p = 1.0f;
  params.max_tokens = 1;
  params.min_tokens = 1;
  params.logprobs = SamplingParams::kMaxLogprobs;
  params.seed = ~uint64_t{0};
  EXPECT_EQ(params.validation_error(), "");
}

TEST(SamplingParamsTest, StopTokenLookup) {
  SamplingParams params;
  params.stop_token_ids = {5, 9};
  EXPECT_TRUE(params.is_stop_token(9));
  EXPECT_FALSE(params.is_stop_token(6));
}

}  // namespace
}  // namespace deepinfer::engine
