// The one-rank job end to end with the fake executor: ordering, error records, reruns,
// preemption, resume after an interruption, the deadline, text prompts and stop strings.
#include "pipeline/generate_job.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <random>

#include <simdjson.h>

#include "io/durable_file.h"
#include "io/json_writer.h"
#include "io/output_verify.h"
#include "io/record_file.h"
#include "io/tiny_tokenizer.h"
#include "io/tokenizer.h"
#include "io/utf8.h"
#include "tests/pipeline/job_test_util.h"
#include "tests/testing/temp_dir.h"

namespace deepinfer::pipeline {
namespace {

using testing::kVocab;
using testing::options_for;
using testing::parsed_results;
using testing::Result;
using testing::results;
using testing::run;

std::string make_input(const deepinfer::testing::TempDir& dir, int n, int bad_line = -1) {
  std::mt19937 rng(123);
  std::string text;
  for (int i = 0; i < n; ++i) {
    if (i == bad_line) {
      text += "{\"id\": \"broken\", \"prompt_token_ids\": [1, 2\n";
      continue;
    }
    const int len = 1 + static_cast<int>(rng() % 300);
    text += "{\"id\": \"r" + std::to_string(i) + "\", \"prompt_token_ids\": [";
    for (int t = 0; t < len; ++t) text += (t ? "," : "") + std::to_string(2 + rng() % (kVocab - 2));
    text += "], \"max_tokens\": " + std::to_string(1 + rng() % 40);
    if (i % 3 == 0) text += ", \"seed\": " + std::to_string(i * 7919);
    text += "}\n";
  }
  return dir.write("in.jsonl", text);
}

TEST(GenerateJobTest, EveryLineGetsOneRecordInInputOrder) {
  deepinfer::testing::TempDir dir;
  const auto input = make_input(dir, 60, /*bad_line=*/25);
  const auto outcome = run(options_for(input, dir.file("out"), 64));
  EXPECT_FALSE(outcome.interrupted);
  const auto records = results(dir.file("out"));
  ASSERT_EQ(records.size(), 60u);
  EXPECT_EQ(outcome.records, 60);
  for (int i = 0; i < 60; ++i) {
    if (i == 25) {
      EXPECT_NE(records[i].find("\"finish_reason\":\"error\""), std::string::npos) << records[i];
      EXPECT_NE(records[i].find("in.jsonl:26: invalid JSON"), std::string::npos) << records[i];
      continue;
    }
    EXPECT_EQ(records[i].rfind("{\"id\":\"r" + std::to_string(i) + "\",", 0), 0u) << records[i];
    EXPECT_TRUE(records[i].find("\"finish_reason\":\"length\"") != std::string::npos ||
                records[i].find("\"finish_reason\":\"stop\"") != std::string::npos)
        << records[i];
  }
  EXPECT_NE(records[3].find("\"seed\":23757"), std::string::npos) << "a given seed is recorded: " << records[3];
  EXPECT_TRUE(std::filesystem::exists(dir.file("out") + "/metrics-00000.jsonl.zst"));
}

TEST(GenerateJobTest, RerunIsByteIdenticalAndOverlapDoesNotChangeResults) {
  deepinfer::testing::TempDir dir;
  const auto input = make_input(dir, 40);
  auto a = options_for(input, dir.file("a"), 64);
  auto b = options_for(input, dir.file("b"), 64);
  auto c = options_for(input, dir.file("c"), 64);
  c.overlap = false;
  run(a);
  run(b);
  run(c);
  EXPECT_EQ(io::read_file(dir.file("a") + "/results-00000-of-00001.jsonl.zst"),
            io::read_file(dir.file("b") + "/results-00000-of-00001.jsonl.zst"));
  EXPECT_EQ(io::verify_output_dirs(dir.file("a"), dir.file("b")).exit_code(), 0);
  // Without overlap the step indices of the metrics may differ, the tokens may not.
  const auto ra = results(dir.file("a")), rc = results(dir.file("c"));
  ASSERT_EQ(ra.size(), rc.size());
  for (std::size_t i = 0; i < ra.size(); ++i) {
    const auto tokens = [](const std::string& r) {
      return r.substr(r.find("\"output_token_ids\""), r.find("\"steps\"") - r.find("\"output_token_ids\""));
    };
    EXPECT_EQ(tokens(ra[i]), tokens(rc[i]));
  }
}

TEST(GenerateJobTest, SmallPoolPreemptsAndGivesTheSameTokens) {
  deepinfer::testing::TempDir dir;
  const auto input = make_input(dir, 40);
  const auto big = run(options_for(input, dir.file("big"), 256));
  const auto small = run(options_for(input, dir.file("small"), 34));  // 33 usable blocks of 16 = 528 tokens
  EXPECT_EQ(big.preemptions, 0);
  EXPECT_GT(small.preemptions, 0);
  const auto rb = results(dir.file("big")), rs = results(dir.file("small"));
  ASSERT_EQ(rb.size(), rs.size());
  int preempted = 0;
  for (std::size_t i = 0; i < rb.size(); ++i) {
    const auto upto_steps = [](const std::string& r) { return r.substr(0, r.find("\"steps\"")); };
    EXPECT_EQ(upto_steps(rb[i]), upto_steps(rs[i]));
    preempted += rs[i].find("\"preemptions\":0}") == std::string::npos;
  }
  EXPECT_GT(preempted, 0);
}

TEST(GenerateJobTest, ResumeAfterAStopEqualsAnUninterruptedRun) {
  deepinfer::testing::TempDir dir;
  const auto input = make_input(dir, 50, /*bad_line=*/7);
  run(options_for(input, dir.file("whole"), 64));
  for (int stop_after : {1, 9, 30, 80}) {
    const std::string out = dir.file("part" + std::to_string(stop_after));
    std::atomic<bool> stop{false};
    auto o = options_for(input, out, 64);
    o.stop_requested = &stop;
    int64_t steps = 0;
    const auto first = run(o, [&](const engine::SchedulerOutput&) {
      if (++steps == stop_after) stop = true;
    });
    EXPECT_TRUE(first.interrupted);
    EXPECT_TRUE(std::filesystem::exists(out + "/results-00000-of-00001.jsonl.zst.partial"));
    EXPECT_EQ(io::verify_output_dirs(dir.file("whole"), out).exit_code(), 2) << "no results file yet";
    const auto kept = testing::kept_records(out);
    o.stop_requested = nullptr;
    o.resume = true;
    const auto second = run(o);
    EXPECT_FALSE(second.interrupted);
    EXPECT_EQ(second.records, 50);
    // Nothing kept runs again: neither the records in order nor those that waited for an earlier one.
    int64_t kept_requests = 0;
    for (const auto& record : kept) kept_requests += record.find("\"finish_reason\":\"error\"") == std::string::npos;
    EXPECT_EQ(kept_requests + second.requests_run, 49) << "stop after " << stop_after;
    EXPECT_GE(static_cast<int64_t>(kept.size()), first.records);
    const auto report = io::verify_output_dirs(dir.file("whole"), out);
    EXPECT_EQ(report.exit_code(), 0) << "stop after " << stop_after << ": " << report.message;
  }
}

TEST(GenerateJobTest, ResumeRefusesAChangedJobAndFreshRunRefusesAnUsedDirectory) {
  deepinfer::testing::TempDir dir;
  const auto input = make_input(dir, 5);
  auto o = options_for(input, dir.file("out"), 64);
  run(o);
  EXPECT_THROW(run(o), std::invalid_argument);
  o.resume = true;
  o.job_json = "{\"test\":2}";
  try {
    run(o);
    FAIL() << "a changed job must be refused";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("field 'test': 1 vs 2"), std::string::npos) << error.what();
  }
  o.job_json = "{\"test\":1}";
  EXPECT_EQ(run(o).records, 5) << "resuming a complete job changes nothing";
}

TEST(GenerateJobTest, ProgressCountsWhatWasReadInTheOnePassOverTheInput) {
  deepinfer::testing::TempDir dir;
  const auto input = make_input(dir, 40, /*bad_line=*/3);
  auto o = options_for(input, dir.file("out"), 64);
  std::vector<std::string> lines;
  o.progress = [&](const std::string& line) { lines.push_back(line); };
  o.progress_interval_s = 0;  // a line after every step
  run(o);
  ASSERT_GE(lines.size(), 3u);
  EXPECT_EQ(lines.back().rfind("[rank 0] 40 done of 40 read (100% of input bytes) |", 0), 0u) << lines.back();
  EXPECT_NE(lines.back().find("ETA 0m00s"), std::string::npos) << lines.back();
  // Admission reads ahead of what is done, not the whole input at once (16 waiting at most,
  // plus the error line, which is written at once).
  const auto at = lines.front().find(" of ", lines.front().find(" done")) + 4;
  EXPECT_EQ(lines.front().substr(at, lines.front().find(" read", at) - at), "17") << lines.front();
}

TEST(GenerateJobTest, DeadlineAbortsWhatIsLeft) {
  deepinfer::testing::TempDir dir;
  const auto input = make_input(dir, 30);
  auto o = options_for(input, dir.file("out"), 64);
  o.deadline_s = 0.0;
  const auto outcome = run(o);
  const auto records = results(dir.file("out"));
  ASSERT_EQ(records.size(), 30u);
  for (const auto& r : records) EXPECT_NE(r.find("\"finish_reason\":\"abort\""), std::string::npos) << r;
  EXPECT_FALSE(outcome.interrupted);
}

// --- Text prompts and stop strings (the tiny tokenizer; the fake executor draws from its 512 ids).

std::shared_ptr<const io::Tokenizer> tiny_tokenizer() {
  static const auto tokenizer = io::Tokenizer::from_json(io::tiny_tokenizer_json(512), "tiny");
  return tokenizer;
}

// The bytes of the ids the tokenizer knows, special tokens skipped (what "text" decodes).
std::string decode_known(const std::vector<int32_t>& ids) {
  std::vector<int32_t> known;
  for (int32_t id : ids)
    if (tiny_tokenizer()->contains(id)) known.push_back(id);
  return tiny_tokenizer()->decode(known, /*skip_special_tokens=*/true);
}

JobOptions text_options_for(const std::string& input, const std::string& out, int32_t num_blocks) {
  JobOptions o = options_for(input, out, num_blocks);
  o.vocab_size = 512;
  o.tokenizer = tiny_tokenizer();
  return o;
}

// Text prompts of 1-60 random words; `stops[i]`, when set, becomes request i's "stop".
std::string make_text_input(const deepinfer::testing::TempDir& dir, const std::string& name, int n,
                            const std::vector<std::string>& stops = {}) {
  static const char* const kWords[] = {"the", "people", "market", "token", "model", "fox", "dog", "42", "café", "über", "x"};
  std::mt19937 rng(99);
  std::string text;
  for (int i = 0; i < n; ++i) {
    std::string prompt;
    for (int w = 1 + static_cast<int>(rng() % 60); w > 0; --w)
      prompt += std::string(prompt.empty() ? "" : " ") + kWords[rng() % std::size(kWords)];
    text += "{\"id\": \"t" + std::to_string(i) + "\", \"prompt\": " + io::json_escape(prompt) +
            ", \"max_tokens\": " + std::to_string(8 + rng() % 40) +
            (i % 2 ? ", \"seed\": " + std::to_string(i) : std::string(", \"temperature\": 0"));
    if (i % 5 == 4) text += ", \"add_special_tokens\": false";
    if (static_cast<std::size_t>(i) < stops.size() && !stops[i].empty())
      text += ", \"stop\": [\"never\", " + io::json_escape(stops[i]) + "]";
    text += "}\n";
  }
  return dir.write(name, text);
}

TEST(GenerateJobTextTest, ResultsCarryTheDecodedText) {
  deepinfer::testing::TempDir dir;
  const auto input = make_text_input(dir, "in.jsonl", 30);
  run(text_options_for(input, dir.file("out"), 64));
  const auto parsed = parsed_results(dir.file("out"));
  ASSERT_EQ(parsed.size(), 30u);
  int with_text = 0;
  for (const auto& r : parsed) {
    ASSERT_TRUE(r.text.has_value()) << r.id;
    EXPECT_FALSE(r.stop_reason.has_value()) << r.id;
    EXPECT_EQ(*r.text, io::to_valid_utf8(decode_known(r.ids))) << r.id;
    with_text += !r.text->empty();
  }
  EXPECT_GT(with_text, 20);
  // Without a tokenizer the same lines are error records, and token-id results have "text": null.
  auto plain = options_for(input, dir.file("plain"), 64);
  plain.vocab_size = 512;
  run(plain);
  for (const auto& r : parsed_results(dir.file("plain"))) {
    EXPECT_EQ(r.finish_reason, "error");
    EXPECT_FALSE(r.text.has_value());
  }
  run(options_for(make_input(dir, 3), dir.file("ids"), 64));
  for (const auto& r : parsed_results(dir.file("ids"))) {
    EXPECT_NE(r.finish_reason, "error") << r.id;
    EXPECT_FALSE(r.text.has_value()) << r.id;
  }
}

// Stop strings taken from a first run's text end each request at the token that completes
// them: tokens up to that one are kept, the text is cut before the string, and the result is
// the same with preemption (a small pool), without overlap, and on a rerun.
TEST(GenerateJobTextTest, StopStringsCutTextAndTokensIndependentOfTheSchedule) {
  deepinfer::testing::TempDir dir;
  constexpr int kRequests = 40;
  run(text_options_for(make_text_input(dir, "free.jsonl", kRequests), dir.file("free"), 256));
  const auto free = parsed_results(dir.file("free"));
  ASSERT_EQ(free.size(), static_cast<std::size_t>(kRequests));
  std::mt19937 rng(5);
  std::vector<std::string> stops(kRequests);
  for (int i = 0; i < kRequests; ++i) {
    const std::string& text = *free[i].text;
    std::vector<std::size_t> starts;  // character starts, the last character left out (it may be a final U+FFFD)
    for (std::size_t pos = 0; pos < text.size(); pos += static_cast<std::size_t>(io::utf8_step(text, pos))) starts.push_back(pos);
    if (starts.size() < 4) continue;
    const std::size_t first = starts.size() / 3 + rng() % (starts.size() / 3);
    const std::size_t last = std::min(starts.size() - 1, first + 1 + rng() % 4);
    stops[i] = text.substr(starts[first], starts[last] - starts[first]);
  }
  const auto input = make_text_input(dir, "stop.jsonl", kRequests, stops);
  run(text_options_for(input, dir.file("stop"), 256));
  const auto stopped = parsed_results(dir.file("stop"));
  ASSERT_EQ(stopped.size(), free.size());
  int checked = 0, shorter = 0;
  for (int i = 0; i < kRequests; ++i) {
    const Result &a = free[i], &b = stopped[i];
    if (stops[i].empty()) {
      EXPECT_EQ(b.ids, a.ids) << b.id;
      continue;
    }
    ++checked;
    EXPECT_EQ(b.finish_reason, "stop") << b.id;
    EXPECT_EQ(b.stop_reason, stops[i]) << b.id;
    EXPECT_EQ(*b.text, a.text->substr(0, a.text->find(stops[i]))) << b.id;
    ASSERT_LE(b.ids.size(), a.ids.size()) << b.id;
    EXPECT_TRUE(std::equal(b.ids.begin(), b.ids.end(), a.ids.begin())) << b.id << ": the kept tokens are a prefix";
    // The last kept token completes the stop string: without it the bytes do not hold it
    // (checked where the string has no U+FFFD, which only the lossy text has).
    const std::vector<int32_t> before(b.ids.begin(), b.ids.end() - 1);
    if (stops[i].find("\xEF\xBF\xBD") == std::string::npos) {
      EXPECT_EQ(decode_known(before).find(stops[i]), std::string::npos) << b.id;
    }
    shorter += b.ids.size() < a.ids.size();
  }
  EXPECT_GT(checked, 25);
  EXPECT_GT(shorter, checked / 2);

  auto small = text_options_for(input, dir.file("small"), 34);  // preempts
  const auto small_outcome = run(small);
  EXPECT_GT(small_outcome.preemptions, 0);
  auto serial = text_options_for(input, dir.file("serial"), 256);
  serial.overlap = false;
  serial.scheduler.max_num_seqs = 3;
  run(serial);
  run(text_options_for(input, dir.file("again"), 256));
  EXPECT_EQ(io::read_file(dir.file("stop") + "/results-00000-of-00001.jsonl.zst"),
            io::read_file(dir.file("again") + "/results-00000-of-00001.jsonl.zst"));
  for (const char* other : {"small", "serial"}) {
    const auto report = io::verify_output_dirs(dir.file("stop"), dir.file(other));
    EXPECT_EQ(report.exit_code(), 0) << other << ": " << report.message;
  }
}

}  // namespace
}  // namespace deepinfer::pipeline
