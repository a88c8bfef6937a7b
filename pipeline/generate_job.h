#pragma once
// One rank's batch job: admits its share of the input gradually into the scheduler, runs the
// step loop to the end, and writes results in input order plus per-step metrics. The run loop
// (GenerateJob::run) names the phases of each iteration: stop and deadline checks, admission,
// the ranks' agreement to go on, one step, finished requests to records, progress.
// Owns: the job's phases and what connects them: the live requests, stop strings (checked as
// each token is committed, ended through Scheduler::terminate), deadline and signal handling.
// Does not own: sharding (sharding.h), reading and admitting (admission.h), records
// (record_builder.h), figures (job_stats.h, progress.h), policy (Scheduler), execution
// (StepExecutor), file formats (io/).

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "engine/step_executor.h"
#include "io/record_file.h"
#include "io/tokenizer.h"
#include "pipeline/admission.h"
#include "pipeline/job_files.h"
#include "pipeline/job_stats.h"
#include "pipeline/live_request.h"
#include "pipeline/ordered_output.h"
#include "pipeline/progress.h"
#include "pipeline/sharding.h"
#include "pipeline/step_loop.h"

namespace deepinfer::pipeline {

// What the ranks of a multi-rank job agree on once per step (logical OR over ranks).
struct LockstepFlags {
  bool busy = false;  // this rank has unfinished requests or unread input
  bool stop = false;  // this rank saw SIGINT/SIGTERM
};

struct JobOptions {
  std::vector<std::string> inputs;
  std::string output_dir;
  uint64_t seed = 0;                     // job seed: derives the seeds of unseeded requests
  engine::Scheduler::Options scheduler;  // pipeline::engine_options (engine_options.h) in a real job
  int64_t vocab_size = 0;                // token ids are checked against it
  int32_t bos_token_id = -1;             // the model config's: text prompts' BOS where the tokenizer adds none
  // From the model directory's tokenizer.json: text prompts, stop strings and each result's
  // "text". Null: token-id prompts only, "text" is null.
  std::shared_ptr<const io::Tokenizer> tokenizer;
  bool overlap = true;  // zero-overhead scheduling (process N-1 during N)
  int rank = 0;
  int world_size = 1;
  // Multi-rank: ORs the flags over all ranks (a collective, once per loop iteration). When
  // set, every rank runs one forward per step (a dummy one when idle) and the loop ends when
  // no rank is busy; null for one rank.
  std::function<LockstepFlags(LockstepFlags)> lockstep;
  bool resume = false;
  std::string job_json;                               // fingerprint of everything that decides the results
  std::optional<double> deadline_s;                   // from the start of the run: then cancel what is left
  const std::atomic<bool>* stop_requested = nullptr;  // SIGINT/SIGTERM: stop admitting, leave a resumable dir
  double progress_interval_s = 5.0;
  // Finished records (in order, and those waiting for an earlier one) and metrics are flushed
  // to disk at least this often, so a kill -9 loses only what finished since (and a full disk
  // is reported then, not at the end).
  double flush_interval_s = 2.0;
  std::function<void(const std::string&)> progress;  // a line of progress (stderr in the CLI)
  // Each processed step with t_s, the seconds since the run started (bench's decode figures).
  std::function<void(const StepTiming&, double t_s)> on_step;
};

class GenerateJob final {
 public:
  // `executor` must outlive the job.
  GenerateJob(JobOptions options, engine::StepExecutor& executor);

  // Runs the job to its end, or until a signal (then the results stay resumable). Once.
  JobOutcome run();

 private:
  JobOutcome join_without_work(int64_t records);
  void open(ResumeState resume);
  bool stop_requested() const;
  bool deadline_passed() const;
  void abort_what_is_left();
  bool another_step(bool stopping);
  void on_processed(const engine::ExecutedStep& step, const std::vector<engine::CommittedToken>& committed, const StepTiming& timing);
  void keep_prompt_logprobs(const engine::ExecutedStep& step);
  void collect_finished();
  void write_record(int64_t index, const ResultRecord& record);
  void flush_if_due();
  ProgressFigures progress_figures() const;
  JobOutcome finish();
  double elapsed_s() const;

  JobOptions o_;
  engine::StepExecutor& executor_;
  engine::Scheduler scheduler_;
  Clock::time_point start_;
  Clock::time_point last_flush_;
  int64_t records_before_ = 0;  // complete records a resumed run started from
  // Opened by open(), unless a resumed rank has nothing left to do.
  std::optional<OrderedOutput> output_;
  std::unique_ptr<io::RecordWriter> metrics_;
  std::optional<Admission> admission_;
  LiveRequests live_;
  JobStats stats_;
  Progress progress_;
  bool started_ = false;
  bool interrupted_ = false;
  bool deadline_hit_ = false;
};

}  // namespace deepinfer::pipeline
