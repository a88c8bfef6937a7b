// What a kill leaves: finished records reach disk on the job's flush timer, those that wait
// for an earlier one through the waiting file, so --resume runs again only what was in flight;
// and a write error (a full disk) stops the job when it happens, not at the end.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <random>
#include <set>

#include "io/durable_file.h"
#include "io/output_verify.h"
#include "pipeline/job_files.h"
#include "pipeline/ordered_output.h"
#include "tests/pipeline/job_test_util.h"
#include "tests/testing/temp_dir.h"

namespace deepinfer::pipeline {
namespace {

namespace fs = std::filesystem;
using testing::options_for;
using testing::run;

// Requests of very different lengths, so many finish before an earlier one.
std::string uneven_input(const deepinfer::testing::TempDir& dir, int n) {
  std::mt19937 rng(7);
  std::string text;
  for (int i = 0; i < n; ++i) {
    const int max_tokens = i % 5 == 0 ? 60 : 1 + static_cast<int>(rng() % 6);
    text += "{\"id\": \"r" + std::to_string(i) + "\", \"max_tokens\": " + std::to_string(max_tokens) +
            ", \"ignore_eos\": true, \"prompt_token_ids\": [" + std::to_string(2 + i % 50) + ", 3, 4]}\n";
  }
  return dir.write("in.jsonl", text);
}

// The files a kill -9 leaves at this moment: what was written is on disk, nothing else.
void snapshot(const std::string& out, const std::string& to) {
  fs::create_directories(to);
  for (const auto& entry : fs::directory_iterator(out)) fs::copy_file(entry.path(), fs::path(to) / entry.path().filename());
}

int64_t count_records(const std::string& path) {
  if (!fs::exists(path)) return 0;
  io::RecordReader reader(path, /*recover=*/true);
  std::string line;
  int64_t n = 0;
  while (reader.next(&line)) ++n;
  return n;
}

// The step at which the uninterrupted run finished a record.
int64_t finish_step(const std::string& record) {
  const auto at = record.find("\"finish_step\":");
  return at == std::string::npos ? -1 : std::stoll(record.substr(at + 14));
}

TEST(OrderedOutputTest, AFlushKeepsEveryRecordInTheResultsFramesOrTheWaitingFile) {
  deepinfer::testing::TempDir dir;
  const std::string results = dir.file("results.jsonl.zst"), waiting = dir.file("waiting.jsonl.zst");
  OrderedOutput output(std::make_unique<io::RecordWriter>(results, io::RecordWriter::Options{.level = 3, .records_per_frame = 2}), 0,
                       waiting);
  output.add(1, "{\"id\":\"b\"}");
  output.add(2, "{\"id\":\"c\"}");
  output.flush();
  EXPECT_EQ(count_records(results + ".partial"), 0);
  auto lines = io::read_all_records(waiting);
  ASSERT_EQ(lines.size(), 2u) << "records 1 and 2 wait for 0";
  int64_t index = -1;
  std::string json;
  ASSERT_TRUE(parse_waiting_line(lines[1], &index, &json));
  EXPECT_EQ(index, 2);
  EXPECT_EQ(json, "{\"id\":\"c\"}");
  EXPECT_FALSE(parse_waiting_line("x {}", &index, &json));
  output.add(0, "{\"id\":\"a\"}");  // 0 and 1 make a frame; 2 is in order but not framed yet
  output.flush();
  EXPECT_EQ(count_records(results + ".partial"), 2);
  lines = io::read_all_records(waiting);
  ASSERT_EQ(lines.size(), 1u);
  ASSERT_TRUE(parse_waiting_line(lines[0], &index, &json));
  EXPECT_EQ(index, 2) << "the unframed record is kept in the waiting file";
  output.close(3);
  EXPECT_FALSE(fs::exists(waiting));
  EXPECT_EQ(io::read_all_records(results).size(), 3u);
}

TEST(OrderedOutputTest, TheResultsFileDoesNotDependOnWhenFlushesHappen) {
  deepinfer::testing::TempDir dir;
  for (const char* name : {"never", "often"}) {
    OrderedOutput output(std::make_unique<io::RecordWriter>(dir.file(name), io::RecordWriter::Options{.level = 3, .records_per_frame = 4}),
                         0, dir.file(std::string(name) + ".waiting"));
    for (int i = 0; i < 30; ++i) {
      output.add(i ^ 1, "{\"i\":" + std::to_string(i ^ 1) + "}");  // pairs arrive swapped
      if (std::string(name) == "often" && i % 3 == 0) output.flush();
    }
    output.close(30);
  }
  EXPECT_EQ(io::read_file(dir.file("never")), io::read_file(dir.file("often")));
}

TEST(JobDurabilityTest, AKillLosesOnlyWorkInFlightAndResumeRedoesNothingFinished) {
  deepinfer::testing::TempDir dir;
  constexpr int kRequests = 60;
  const auto input = uneven_input(dir, kRequests);
  auto whole_options = options_for(input, dir.file("whole"), 64);
  whole_options.scheduler.max_num_seqs = 6;
  run(whole_options);
  const auto records = testing::results(dir.file("whole"));
  ASSERT_EQ(records.size(), static_cast<std::size_t>(kRequests));
  int ahead_used = 0;
  for (int64_t kill_at : {5, 17, 33, 48, 70}) {
    const std::string out = dir.file("run" + std::to_string(kill_at)), killed = dir.file("killed" + std::to_string(kill_at));
    auto o = options_for(input, out, 64);
    o.scheduler.max_num_seqs = 6;
    o.flush_interval_s = 0;  // flush after every step
    run(o, [&](const engine::SchedulerOutput& step) {
      if (step.step == kill_at) snapshot(out, killed);
    });
    ASSERT_TRUE(fs::exists(killed)) << kill_at;
    EXPECT_EQ(io::read_file(out + "/results-00000-of-00001.jsonl.zst"),
              io::read_file(dir.file("whole") + "/results-00000-of-00001.jsonl.zst"))
        << "flushing after every step leaves the same bytes";
    // Every request the whole run finished two steps before the kill (processed, then flushed) was kept.
    int64_t finished = 0;
    for (const auto& r : records) finished += finish_step(r) >= 0 && finish_step(r) <= kill_at - 2;
    const int64_t in_order = count_records(killed + "/results-00000-of-00001.jsonl.zst.partial");
    const auto kept = static_cast<int64_t>(testing::kept_records(killed).size());
    EXPECT_GE(kept, finished) << "kill at step " << kill_at;
    ahead_used += kept > in_order;
    o.resume = true;
    o.output_dir = killed;
    const auto resumed = run(o);
    EXPECT_EQ(resumed.requests_run, kRequests - kept) << "kill at step " << kill_at << ": nothing finished runs again";
    const auto report = io::verify_output_dirs(dir.file("whole"), killed);
    EXPECT_EQ(report.exit_code(), 0) << "kill at step " << kill_at << ": " << report.message;
    EXPECT_FALSE(fs::exists(killed + "/waiting-00000-of-00001.jsonl.zst"));
  }
  EXPECT_GE(ahead_used, 3) << "the uneven input must leave records waiting at most kill points";
}

TEST(JobDurabilityTest, ResumeStartsAJobKilledBeforeItRecordedJobJson) {
  deepinfer::testing::TempDir dir;
  const auto input = uneven_input(dir, 12);
  run(options_for(input, dir.file("whole"), 64));
  // What a kill between creating OUT and renaming job.json into place leaves.
  const std::string killed = dir.file("killed");
  fs::create_directories(killed);
  dir.write("killed/job.json.partial", "{\"truncated");
  auto o = options_for(input, killed, 64);
  o.resume = true;
  const auto resumed = run(o);
  EXPECT_EQ(resumed.requests_run, 12);
  const auto report = io::verify_output_dirs(dir.file("whole"), killed);
  EXPECT_EQ(report.exit_code(), 0) << report.message;
  // Two ranks killed before rank 0's job.json: rank 1 had started its (empty) results file,
  // which holds nothing, so its resume starts too.
  const std::string early = dir.file("early");
  fs::create_directories(early);
  dir.write("early/results-00001-of-00002.jsonl.zst.partial", "");
  EXPECT_NO_THROW(open_results(early, 1, 2, "{}", /*resume=*/true, {}));
  EXPECT_NO_THROW(open_results(early, 0, 2, "{}", /*resume=*/true, {}));
  // Results with no job.json cannot be checked against the job; no directory at all is a wrong --output.
  const std::string orphan = dir.file("orphan");
  fs::create_directories(orphan);
  {
    io::RecordWriter kept(orphan + "/results-00000-of-00001.jsonl.zst", {});
    kept.append("{\"id\":\"a\"}");
    kept.flush();  // one complete frame in the .partial
  }
  for (const std::string& out : {orphan, dir.file("missing")}) {
    std::string error;
    try {
      open_results(out, 0, 1, "{}", /*resume=*/true, {});
    } catch (const std::invalid_argument& e) {
      error = e.what();
    }
    EXPECT_NE(error.find(out + " has no job.json"), std::string::npos) << out << ": " << error;
  }
}

TEST(JobDurabilityTest, ADirectoryARunningJobHoldsIsRefused) {
  deepinfer::testing::TempDir dir;
  const std::string out = dir.file("out");
  fs::create_directories(out);
  // Another job's lock (another open file description conflicts as another process's would).
  const int fd = ::open((out + "/.lock-00000").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  for (const bool resume : {true, false}) {
    std::string error;
    try {
      open_results(out, 0, 1, "{}", resume, {});
    } catch (const std::invalid_argument& e) {
      error = e.what();
    }
    EXPECT_NE(error.find("output directory " + out + " is in use by another running job"), std::string::npos) << resume << ": " << error;
  }
  EXPECT_FALSE(fs::exists(out + "/job.json")) << "nothing written into it";
  // A whole job (as every rank of a job checks before it makes a file): refused, OUT untouched.
  const auto input = uneven_input(dir, 4);
  auto o = options_for(input, out, 64);
  o.resume = true;
  EXPECT_THROW(run(o), std::invalid_argument);
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(out)) names.push_back(entry.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{".lock-00000"});
  ::close(fd);
  // Once that job is gone the directory can be used (here: started, nothing of a job being in it).
  EXPECT_NO_THROW(open_results(out, 0, 1, "{}", /*resume=*/true, {}));
}

TEST(JobDurabilityTest, AWriteErrorStopsTheJobWhenItHappensNotAtTheEnd) {
  deepinfer::testing::TempDir dir;
  const auto input = uneven_input(dir, 200);
  auto o = options_for(input, dir.file("out"), 64);
  o.flush_interval_s = 0;
  testing::FakeStepExecutor full_run(testing::fake_for(o));
  GenerateJob(options_for(input, dir.file("whole"), 64), full_run).run();
  // A file size limit stands in for a full disk: write() fails (EFBIG) once a file reaches it.
  struct rlimit old_limit {};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit limit = old_limit;
  limit.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limit), 0);
  testing::FakeStepExecutor executor(testing::fake_for(o));
  std::string error;
  try {
    GenerateJob(o, executor).run();
  } catch (const std::runtime_error& e) {
    error = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(error.find("cannot write " + dir.file("out") + "/"), std::string::npos) << error;
  EXPECT_LT(executor.executed, full_run.executed / 2) << "reported where the write failed, mid-run";
}

}  // namespace
}  // namespace deepinfer::pipeline
