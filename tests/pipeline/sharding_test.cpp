// OwnerRank: the streaming, prompt-token-balanced assignment of input items to ranks.
#include "pipeline/sharding.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace deepinfer::pipeline {
namespace {

TEST(OwnerRankTest, BalancesPromptTokensDeterministically) {
  OwnerRank owner(2);
  // Loads (1 + tokens): r0 gets 100 -> 101; r1 gets 10 -> 11; r1 gets 10 -> 22; r1 gets 50 -> 73;
  // r1 gets 0 (an error line) -> 74; r1 -> 105; r0 next.
  std::vector<int> got;
  for (int64_t tokens : {100, 10, 10, 50, 0, 30, 5}) got.push_back(owner.next(tokens));
  EXPECT_EQ(got, (std::vector<int>{0, 1, 1, 1, 1, 1, 0}));
  EXPECT_EQ(OwnerRank(3).peek(), 0);
  EXPECT_THROW(OwnerRank(0), std::invalid_argument);
  EXPECT_THROW(OwnerRank(-1), std::invalid_argument);
}

TEST(OwnerRankTest, ErrorLinesCountNoPromptTokens) {
  io::RequestLine request;
  request.prompt_token_ids = {1, 2, 3};
  EXPECT_EQ(sharding_tokens(request), 3);
  EXPECT_EQ(sharding_tokens(io::RequestError{.id = "b", .input = {}, .message = "bad"}), 0);
}

}  // namespace
}  // namespace deepinfer::pipeline
