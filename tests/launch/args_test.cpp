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

TEST(ArgsTest, RangesAndNumbersAreCheckedNotWrapped) {
  EXPECT_EQ(parse({"--n", "7"}).get_int("n", 0, 1, 8), 7);
  EXPECT_EQ(parse({}).get_int("n", 0, 1, 8), 0) << "the fallback is not range-checked";
  for (const char* text : {"0", "9", "4294967297"}) {
    try {
      parse({"--n", text}).get_int("n", 1, 1, 8);
      ADD_FAILURE() << text << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()), std::string("option --n = ") + text + " is out of range [1, 8]");
    }
  }
  EXPECT_DOUBLE_EQ(parse({"--n", "2.5"}).get_double("n", 0.0, 0.0), 2.5);
  EXPECT_DOUBLE_EQ(parse({}).get_double("n", 4.0, 0.0), 4.0);
  for (const char* text : {"abc", "", "nan", "inf", "3s", " 5", "0x10"}) {
    try {
      parse({"--n", text}).get_double("n", 0.0, 0.0);
      ADD_FAILURE() << "'" << text << "' accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()), std::string("option --n = '") + text + "' is not a finite number");
    }
  }
  for (const char* text : {"1e400", "1e-400"}) {
    try {
      parse({"--n", text}).get_double("n", 0.0, 0.0);
      ADD_FAILURE() << text << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()), std::string("option --n = '") + text + "' is outside the range of a double");
    }
  }
  try {
    parse({"--n", "-1"}).get_double("n", 0.0, 0.0);
    ADD_FAILURE() << "-1 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "option --n = -1 must be >= 0");
  }
}

}  // namespace
}  // namespace deepinfer::launch
