#pragma once
// One rank's batch job: reads its share of the input lines, admits them gradually into the
// scheduler (memory bounded by the admission window, not the input size), runs the step loop
// to the end, and writes results in input order plus per-step metrics.
// Owns: admission, the request -> record mapping, output text and stop strings (checked as
// each token is committed, ended through Scheduler::terminate), deadline and stop handling,
// progress.
// Does not own: policy (Scheduler), execution (StepExecutor), file formats (io/).

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "engine/step_executor.h"
#include "io/request_reader.h"

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
  engine::Scheduler::Options scheduler;  // pool sizes, budgets, eos, max_model_len
  int64_t vocab_size = 0;                // token ids are checked against it
  int32_t bos_token_id = -1;             // the model config's: text prompts' BOS where the tokenizer adds none
  // From the model directory's tokenizer.json: text prompts, stop strings and each result's
  // "text". Null: token-id prompts only, "text" is null.
  std::shared_ptr<const io::Tokenizer> tokenizer;
  bool overlap = true;                   // zero-overhead scheduling (process N-1 during N)
  int rank = 0;
  int world_size = 1;
  // Multi-rank: ORs the flags over all ranks (a collective, once per loop iteration). When
  // set, every rank runs one forward per step (a dummy one when idle) and the loop ends when
  // no rank is busy; null for one rank.
  std::function<LockstepFlags(LockstepFlags)> lockstep;
  bool resume = false;
  std::string job_json;                  // fingerprint of everything that decides the results
  std::optional<double> deadline_s;      // from the start of the run: then cancel what is left
  const std::atomic<bool>* stop_requested = nullptr;  // SIGINT/SIGTERM: stop admitting, leave a resumable dir
  double progress_interval_s = 5.0;
  std::function<void(const std::string&)> progress;   // a line of progress (stderr in the CLI)
};

struct JobOutcome {
  bool interrupted = false;        // stopped by a signal: results left resumable (.partial)
  int64_t records = 0;             // records in this rank's results file
  int64_t requests_run = 0;        // requests finished in this run (not counting resumed ones)
  int64_t prompt_tokens = 0;       // of the requests run
  int64_t output_tokens = 0;
  int64_t steps = 0;
  int64_t preemptions = 0;
  double elapsed_s = 0;
  double mean_ttft_ms = 0;         // over requests run that produced a token
  double mean_tpot_ms = 0;         // over requests run with >= 2 output tokens
  std::vector<std::string> finish_reasons;  // counts as "reason=N"
};

// Which rank owns each input item, in global input order (every rank reads every line and
// makes the same decisions): the item goes to the rank with the smallest load so far (ties:
// the lowest rank), then that rank's load grows by 1 + the item's prompt tokens (0 for a line
// that is an error). Streaming, the same on every rerun, recorded as "sharding":
// kShardingName in job.json. `deepinfer cat` inverts it from the records' num_prompt_tokens.
inline constexpr const char* kShardingName = "balanced-by-prompt-tokens";
class OwnerRank final {
 public:
  explicit OwnerRank(int world_size);
  int peek() const;                 // owner of the next item (it does not depend on the item)
  int next(int64_t prompt_tokens);  // owner of the next item, which then counts as assigned
 private:
  std::vector<int64_t> load_;
};
// The prompt tokens that sharding counts for an input item.
int64_t sharding_tokens(const io::RequestItem& item);

JobOutcome run_generate_job(const JobOptions& options, engine::StepExecutor& executor);

}  // namespace deepinfer::pipeline
