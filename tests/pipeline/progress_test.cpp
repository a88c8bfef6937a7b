// The progress line: counts of what was read so far, the byte fraction and the ETA from it.
#include "pipeline/progress.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace deepinfer::pipeline {
namespace {

ProgressFigures figures() {
  ProgressFigures f;
  f.rank = 1;
  f.elapsed_s = 100;
  f.done = 300;
  f.read = 400;
  f.bytes_read = 250;
  f.total_bytes = 1000;
  f.prompt_tokens = 5000;
  f.output_tokens = 2500;
  f.blocks = {.num_blocks = 64, .num_usable = 63, .num_free = 53, .num_used = 10, .peak_used = 12};
  f.slots = {.num_slots = 9, .num_usable = 8, .num_free = 0, .num_used = 8, .peak_used = 8};
  f.preemptions = 2;
  return f;
}

TEST(ProgressTest, EtaExtrapolatesThisRunsRateToTheItemsTheByteFractionPredicts) {
  // 400 items in 25% of the bytes: 1600 expected, 1300 left at 3 per second.
  EXPECT_EQ(progress_line(figures()),
            "[rank 1] 300 done of 400 read (25% of input bytes) | in 50 tok/s, out 25 tok/s | blocks 10/63, slots 8/8 | "
            "preemptions 2 | ETA 7m13s");
  ProgressFigures resumed = figures();
  resumed.done_before = 200;  // 100 in this run: 1 per second
  EXPECT_NE(progress_line(resumed).find("ETA 21m40s"), std::string::npos) << progress_line(resumed);
  ProgressFigures all = figures();
  all.bytes_read = all.total_bytes;
  all.elapsed_s = 3 * 3600;  // 100 left at 1 per 36 s
  EXPECT_NE(progress_line(all).find("(100% of input bytes) | in 0 tok/s, out 0 tok/s"), std::string::npos) << progress_line(all);
  EXPECT_NE(progress_line(all).find("ETA 1h00m"), std::string::npos) << progress_line(all);
}

TEST(ProgressTest, RecordsWaitingForAnEarlierOneAreShownWhileTheyWait) {
  ProgressFigures f = figures();
  f.waiting = 14;
  EXPECT_NE(progress_line(f).find(" done (+14 waiting) of "), std::string::npos) << progress_line(f);
  f.waiting = 0;
  EXPECT_EQ(progress_line(f).find("waiting"), std::string::npos) << progress_line(f);
}

TEST(ProgressTest, UnknownSizeOrNoRateGivesNoEta) {
  ProgressFigures pipe = figures();
  pipe.total_bytes = -1;
  EXPECT_NE(progress_line(pipe).find("300 done of 400 read | in"), std::string::npos) << progress_line(pipe);
  EXPECT_NE(progress_line(pipe).find("ETA ?"), std::string::npos);
  ProgressFigures start = figures();
  start.done = 0;
  EXPECT_NE(progress_line(start).find("ETA ?"), std::string::npos);
}

TEST(ProgressTest, ReportsAtTheIntervalAndAlwaysAtTheEnd) {
  std::vector<std::string> lines;
  Progress progress([&](const std::string& line) { lines.push_back(line); }, /*interval_s=*/3600);
  progress.report(/*final=*/false, figures);
  EXPECT_TRUE(lines.empty());
  progress.report(/*final=*/true, figures);
  ASSERT_EQ(lines.size(), 1u);
  Progress every_time([&](const std::string& line) { lines.push_back(line); }, /*interval_s=*/0);
  every_time.report(/*final=*/false, figures);
  EXPECT_EQ(lines.size(), 2u);
  Progress silent(nullptr, 0);
  silent.report(/*final=*/true, figures);  // no sink: nothing, no crash
}

}  // namespace
}  // namespace deepinfer::pipeline
