// How an error that reaches main() becomes an exit code: user errors 2, internal errors 1.
#include "launch/exit_code.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "engine/check.h"
#include "engine/state_manager.h"

namespace deepinfer::launch {
namespace {

int exit_code_of(const std::function<int()>& command, std::string* stderr_text) {
  ::testing::internal::CaptureStderr();
  const int code = run_reporting_errors("cmd", command);
  *stderr_text = ::testing::internal::GetCapturedStderr();
  return code;
}

TEST(ExitCodeTest, ABrokenInvariantExitsOneAsAnInternalError) {
  std::string text;
  // A real one: freeing a slot the pool does not have is a bug of the caller, not bad input.
  const int code = exit_code_of(
      [] {
        engine::StateManager slots({.num_slots = 2});
        slots.free(5);
        return 0;
      },
      &text);
  EXPECT_EQ(code, kExitError);
  EXPECT_EQ(text.rfind("deepinfer cmd: internal error: ", 0), 0u) << text;
  EXPECT_NE(text.find("state slot 5 out of range"), std::string::npos) << text;
  EXPECT_EQ(exit_code_of(
                []() -> int {
                  ENGINE_ASSERT(1 + 1 == 3, "arithmetic");
                  return 0;
                },
                &text),
            kExitError);
}

TEST(ExitCodeTest, BadArgumentsExitTwoAndOtherErrorsOne) {
  std::string text;
  EXPECT_EQ(exit_code_of([]() -> int { throw std::invalid_argument("--num-blocks must be >= 2"); }, &text), kExitBadArguments);
  EXPECT_EQ(text, "deepinfer cmd: --num-blocks must be >= 2\n");
  EXPECT_EQ(exit_code_of([]() -> int { throw std::runtime_error("disk full"); }, &text), kExitError);
  EXPECT_EQ(text, "deepinfer cmd: error: disk full\n");
  EXPECT_EQ(exit_code_of([] { return 130; }, &text), 130);
  EXPECT_EQ(text, "");
}

}  // namespace
}  // namespace deepinfer::launch
