#include "launch/args.h"

#include <gtest/gtest.h>

#include <vector>

namespace deepinfer::launch {
namespace {

Args parse(std::vector<const char*> argv) {
  argv.insert(argv.begin(), {"deepinfer", "cmd"});
  return Args(static_cast<int>(argv.size()), const_cast<char**>(argv.data()), 2, {"input", "seed", "n"}, {"resume"});
}

TEST(ArgsTest, ValuesFlagsRepeatsAndPositionals) {
  auto args = parse({"--input", "a", "--input=b", "--resume", "pos", "--seed", "18446744073709551615"});
  EXPECT_EQ(args.all("input"), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(args.flag("resume"));
  EXPECT_EQ(args.positionals(), (std::vector<std::string>{"pos"}));
  EXPECT_EQ(args.get_uint64("seed", 0), UINT64_MAX);
  EXPECT_EQ(args.get_int("n", 5), 5);
  EXPECT_EQ(args.get("input"), "b") << "a repeated single-valued option takes its last value";
}

TEST(ArgsTest, ErrorsNameTheOption) {
  EXPECT_THROW(parse({"--bogus", "1"}), std::invalid_argument);
  EXPECT_THROW(parse({"--input"}), std::invalid_argument);
  EXPECT_THROW(parse({"--resume=1"}), std::invalid_argument);
  try {
    parse({"--n", "12x"}).get_int("n", 0);
    FAIL();
  } catch (const std::invalid_argument& error) {
    EXPECT_STREQ(error.what(), "option --n = '12x' is not an integer");
  }
  EXPECT_THROW(parse({"--seed", "-1"}).get_uint64("seed", 0), std::invalid_argument);
  EXPECT_THROW(parse({}).get("input"), std::invalid_argument);
}

}  // namespace
}  // namespace deepinfer::launch
