#pragma once
// The figures of one rank's run: JobOutcome (what the run reports; summary.json aggregates the
// ranks'), JobStats (which collects the per-request ones as requests finish) and the line of
// metrics-RRRRR.jsonl.zst for each processed step.
// Owns: counting and averaging. Does not own: deciding outcomes, writing files.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/sequence.h"
#include "pipeline/live_request.h"
#include "pipeline/result_record.h"
#include "pipeline/step_loop.h"

namespace deepinfer::pipeline {

struct JobOutcome {
  bool interrupted = false;   // stopped by a signal: results left resumable (.partial)
  bool was_complete = false;  // --resume found this rank's results file complete: nothing ran
  int64_t records = 0;        // records in this rank's results file
  int64_t requests_run = 0;   // requests finished in this run (not counting resumed ones)
  int64_t prompt_tokens = 0;  // of the requests run
  int64_t output_tokens = 0;
  int64_t steps = 0;
  int64_t preemptions = 0;
  double elapsed_s = 0;
  double mean_ttft_ms = 0;                  // over requests run that produced a token
  double mean_tpot_ms = 0;                  // over requests run with >= 2 output tokens
  std::vector<std::string> finish_reasons;  // counts as "reason=N"
};

class JobStats final {
 public:
  // Every record written, by its finish reason.
  void count_record(const ResultRecord& record) { ++finish_reasons_[record.finish_reason]; }
  // A request of this run that finished at `now`: its tokens, time to first token and time per
  // output token after the first.
  void count_finished(const engine::Sequence& seq, const LiveRequest& request, Clock::time_point now);
  int64_t prompt_tokens() const { return prompt_tokens_; }
  // Sets requests_run, the token counts, the means and finish_reasons.
  void fill(JobOutcome& outcome) const;

 private:
  int64_t requests_run_ = 0;
  int64_t prompt_tokens_ = 0;
  int64_t output_tokens_ = 0;
  double ttft_sum_ms_ = 0;
  double tpot_sum_ms_ = 0;
  int64_t ttft_count_ = 0;
  int64_t tpot_count_ = 0;
  std::map<std::string, int64_t> finish_reasons_;
};

// One step's line of the metrics file: step, kind, batch, committed tokens, host timings and
// t_s, the seconds since the job started.
std::string step_metrics_json(const StepTiming& timing, int64_t committed, double t_s);

}  // namespace deepinfer::pipeline
