// How the job treats input it cannot run: requests beyond the length limits become error
// records naming their line (and cost no throughput), and unusable input paths are refused
// before anything is written.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/pipeline/job_test_util.h"
#include "tests/testing/temp_dir.h"

namespace deepinfer::pipeline {
namespace {

using testing::options_for;
using testing::parsed_results;
using testing::run;

std::string request_line(const std::string& id, int prompt_tokens, int max_tokens) {
  std::string line = "{\"id\": \"" + id + "\", \"max_tokens\": " + std::to_string(max_tokens) + ", \"prompt_token_ids\": [";
  for (int t = 0; t < prompt_tokens; ++t) line += (t ? "," : "") + std::to_string(2 + t % 60);
  return line + "]}\n";
}

TEST(JobInputTest, RequestsBeyondMaxModelLenAreErrorRecordsNamingTheirLine) {
  deepinfer::testing::TempDir dir;
  // max_model_len is 512 (options_for).
  const auto input = dir.write("in.jsonl", request_line("ok1", 10, 4) + request_line("long", 600, 4) + request_line("over", 500, 20) +
                                               request_line("edge", 500, 12) + request_line("ok2", 7, 3));
  const auto outcome = run(options_for(input, dir.file("out"), 64));
  const auto r = parsed_results(dir.file("out"));
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(r[1].finish_reason, "error");
  EXPECT_EQ(r[1].num_prompt_tokens, 600) << "cat replays the sharding by it";
  EXPECT_EQ(r[2].finish_reason, "error");
  EXPECT_EQ(r[2].num_prompt_tokens, 500);
  EXPECT_TRUE(r[2].ids.empty()) << "not cut silently: nothing ran";
  EXPECT_NE(r[3].finish_reason, "error") << "500 + 12 = 512 fits exactly";
  const auto records = testing::results(dir.file("out"));
  EXPECT_NE(records[1].find("\"error\":\"" + input + ":2: prompt of 600 tokens leaves no room for output within max-model-len 512\""),
            std::string::npos)
      << records[1];
  EXPECT_NE(records[2].find("\"error\":\"" + input +
                            ":3: prompt of 500 tokens + max_tokens 20 = 520 exceeds max-model-len 512; lower max_tokens to at most 12\""),
            std::string::npos)
      << records[2];
  EXPECT_NE(records[2].find("\"seed\":null"), std::string::npos) << records[2];
  EXPECT_EQ(outcome.requests_run, 3);
  EXPECT_EQ(outcome.prompt_tokens, 10 + 500 + 7) << "refused prompts are not throughput";
}

TEST(JobInputTest, AnInputThatIsADirectoryIsRefusedBeforeTheOutputDirectoryIsMade) {
  deepinfer::testing::TempDir dir;
  std::filesystem::create_directory(dir.file("inputs"));
  for (const std::string& input : {dir.file("inputs"), dir.file("missing.jsonl")}) {
    try {
      run(options_for(input, dir.file("out"), 64));
      FAIL() << input << " must be refused";
    } catch (const std::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find(input), std::string::npos) << error.what();
    }
    EXPECT_FALSE(std::filesystem::exists(dir.file("out"))) << input;
  }
}

}  // namespace
}  // namespace deepinfer::pipeline
