// Logprobs in result records: present exactly for the requests that ask, one entry per output
// token (chosen id, its logprob, the top N), and byte-identical across reruns and preemption.
#include <gtest/gtest.h>

#include <simdjson.h>

#include "io/durable_file.h"
#include "io/output_verify.h"
#include "tests/pipeline/job_test_util.h"
#include "tests/testing/temp_dir.h"

namespace deepinfer::pipeline {
namespace {

using testing::options_for;
using testing::run;

std::string logprobs_input(const deepinfer::testing::TempDir& dir, int n) {
  std::string text;
  for (int i = 0; i < n; ++i) {
    text += "{\"id\": \"r" + std::to_string(i) + "\", \"max_tokens\": " + std::to_string(20 + i % 40) + ", \"prompt_token_ids\": [";
    for (int t = 0; t < 10 + 13 * (i % 7); ++t) text += (t ? "," : "") + std::to_string(2 + (t * 7 + i) % 60);
    text += "]";
    if (i % 3 == 1) text += ", \"logprobs\": 0";
    if (i % 3 == 2) text += ", \"logprobs\": " + std::to_string(1 + i % 5);
    text += "}\n";
  }
  return dir.write("in.jsonl", text);
}

TEST(JobLogprobsTest, RecordsCarryLogprobsForTheRequestsThatAskByteIdenticalUnderPreemption) {
  deepinfer::testing::TempDir dir;
  constexpr int kRequests = 30;
  const auto input = logprobs_input(dir, kRequests);
  run(options_for(input, dir.file("a"), 256));
  const auto records = testing::results(dir.file("a"));
  ASSERT_EQ(records.size(), static_cast<std::size_t>(kRequests));
  simdjson::dom::parser parser;
  for (int i = 0; i < kRequests; ++i) {
    const simdjson::dom::element r = parser.parse(records[i]);
    const simdjson::dom::element logprobs = r["logprobs"];
    if (i % 3 == 0) {
      EXPECT_TRUE(logprobs.is_null()) << records[i];
      continue;
    }
    const simdjson::dom::array tokens = r["output_token_ids"].get_array();
    const simdjson::dom::array entries = logprobs.get_array();
    ASSERT_EQ(entries.size(), tokens.size()) << records[i];
    ASSERT_GT(tokens.size(), 0u);
    const std::size_t top = i % 3 == 1 ? 0 : static_cast<std::size_t>(1 + i % 5);
    auto token = tokens.begin();
    for (simdjson::dom::element entry : entries) {
      EXPECT_EQ(entry["token"].get_int64().value(), (*token).get_int64().value()) << records[i];
      const double logprob = entry["logprob"].get_double().value();
      EXPECT_LE(logprob, 0.0);
      const simdjson::dom::array top_list = entry["top"].get_array();
      ASSERT_EQ(top_list.size(), top) << records[i];
      if (top > 0) {
        EXPECT_EQ((*top_list.begin()).at(0).get_int64().value(), (*token).get_int64().value());
      }
      ++token;
    }
  }
  // Preemption (a small pool) and a rerun: the same bytes, logprobs included.
  EXPECT_GT(run(options_for(input, dir.file("small"), 12)).preemptions, 0);
  run(options_for(input, dir.file("b"), 256));
  EXPECT_EQ(io::read_file(dir.file("a") + "/results-00000-of-00001.jsonl.zst"),
            io::read_file(dir.file("b") + "/results-00000-of-00001.jsonl.zst"));
  const auto report = io::verify_output_dirs(dir.file("a"), dir.file("small"));
  EXPECT_EQ(report.exit_code(), 0) << report.message;
}

// Prompt logprobs: one entry per prompt token, null at position 0, each naming its prompt token
// (the made-up values of FakeStepExecutor::add_prompt_logprobs), whatever the chunking, and
// byte-identical across a rerun and under preemption (a recomputed prompt adds nothing).
TEST(JobLogprobsTest, PromptLogprobsCoverEveryPromptTokenOnceWhateverTheChunksAndPreemptions) {
  deepinfer::testing::TempDir dir;
  constexpr int kRequests = 24;
  std::string text;
  for (int i = 0; i < kRequests; ++i) {
    text += "{\"id\": \"p" + std::to_string(i) + "\", \"max_tokens\": " + std::to_string(20 + i % 40) + ", \"prompt_token_ids\": [";
    for (int t = 0; t < 5 + 20 * (i % 5); ++t) text += (t ? "," : "") + std::to_string(2 + (t * 11 + i) % 60);
    text += "]";
    if (i % 2 == 1) text += ", \"prompt_logprobs\": " + std::to_string(i % 4);
    text += "}\n";
  }
  const std::string input = dir.write("in.jsonl", text);
  JobOptions small_steps = options_for(input, dir.file("a"), 256);
  small_steps.scheduler.max_num_batched_tokens = 48;  // prompts of up to 85 tokens in two chunks
  run(small_steps);
  const auto records = testing::results(dir.file("a"));
  ASSERT_EQ(records.size(), static_cast<std::size_t>(kRequests));
  simdjson::dom::parser parser;
  for (int i = 0; i < kRequests; ++i) {
    const simdjson::dom::element r = parser.parse(records[i]);
    const simdjson::dom::element prompt = r["prompt_logprobs"];
    if (i % 2 == 0) {
      EXPECT_TRUE(prompt.is_null()) << records[i];
      continue;
    }
    const simdjson::dom::array entries = prompt.get_array();
    ASSERT_EQ(static_cast<int64_t>(entries.size()), r["num_prompt_tokens"].get_int64().value()) << records[i];
    int64_t position = 0;
    for (simdjson::dom::element entry : entries) {
      if (position == 0) {
        EXPECT_TRUE(entry.is_null()) << records[i];
      } else {
        const int64_t token = 2 + (position * 11 + i) % 60;
        ASSERT_FALSE(entry.is_null()) << "position " << position << " of " << records[i];
        EXPECT_EQ(entry["token"].get_int64().value(), token);
        EXPECT_FLOAT_EQ(static_cast<float>(entry["logprob"].get_double().value()),
                        -static_cast<float>(token % 5) / 8 - static_cast<float>(position) / 4096);
        EXPECT_EQ(entry["top"].get_array().size(), static_cast<std::size_t>(i % 4));
      }
      ++position;
    }
  }
  JobOptions preempting = options_for(input, dir.file("small"), 12);
  preempting.scheduler.max_num_batched_tokens = 48;
  EXPECT_GT(run(preempting).preemptions, 0);
  run(options_for(input, dir.file("b"), 256));  // one chunk per prompt
  const auto same_chunks = io::verify_output_dirs(dir.file("a"), dir.file("small"));
  EXPECT_EQ(same_chunks.exit_code(), 0) << same_chunks.message;
  const auto other_chunks = io::verify_output_dirs(dir.file("a"), dir.file("b"));
  EXPECT_EQ(other_chunks.exit_code(), 0) << other_chunks.message;
}

}  // namespace
}  // namespace deepinfer::pipeline
