#include "pipeline/generate_job.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>

#include "engine/check.h"
#include "pipeline/record_builder.h"

namespace deepinfer::pipeline {

GenerateJob::GenerateJob(JobOptions options, engine::StepExecutor& executor)
    : o_(std::move(options)), executor_(executor), scheduler_(o_.scheduler), progress_(o_.progress, o_.progress_interval_s) {}

JobOutcome GenerateJob::run() {
  ENGINE_ASSERT(!started_, "GenerateJob::run() called twice");
  started_ = true;
  start_ = Clock::now();
  io::check_input_files(o_.inputs);  // before the output directory is made
  // Before any rank makes a file: if another running job holds OUT on any rank, every rank stops.
  const bool in_use = !lock_output_dir(o_.output_dir, o_.rank);
  if (o_.lockstep ? o_.lockstep({.busy = false, .stop = in_use}).stop : in_use) throw_output_in_use(o_.output_dir);
  ResumeState resume = open_results(o_.output_dir, o_.rank, o_.world_size, o_.job_json, o_.resume, {});
  if (resume.results_complete) return join_without_work(resume.records_done);
  open(std::move(resume));
  StepLoop loop(
      scheduler_, executor_, o_.overlap,
      [this](const engine::ExecutedStep& step, const std::vector<engine::CommittedToken>& committed, const StepTiming& timing) {
        on_processed(step, committed, timing);
      },
      /*lockstep=*/static_cast<bool>(o_.lockstep));
  for (;;) {
    const bool stopping = stop_requested();
    if (stopping && !o_.lockstep) {
      interrupted_ = true;
      break;
    }
    if (deadline_passed()) abort_what_is_left();
    if (!deadline_hit_ && !stopping) admission_->admit(scheduler_, live_);
    if (!another_step(stopping)) break;  // drain() below processes the step in flight
    loop.step();
    collect_finished();
    flush_if_due();
    progress_.report(/*final=*/false, [this] { return progress_figures(); });
  }
  loop.drain();
  collect_finished();
  return finish();
}

// A resumed rank whose results file is complete: in a multi-rank job it still joins every step.
JobOutcome GenerateJob::join_without_work(int64_t records) {
  JobOutcome outcome;
  outcome.records = records;
  outcome.was_complete = true;
  while (o_.lockstep) {
    const LockstepFlags all = o_.lockstep({.busy = false, .stop = stop_requested()});
    if (all.stop) outcome.interrupted = true;
    if (all.stop || !all.busy) break;
    executor_.execute_dummy();
  }
  return outcome;
}

void GenerateJob::open(ResumeState resume) {
  records_before_ = resume.records_done;
  const std::string dir = o_.output_dir;
  output_.emplace(std::move(resume.writer), resume.records_done,
                  (std::filesystem::path(dir) / waiting_file_name(o_.rank, o_.world_size)).string());
  std::set<int64_t> finished_ahead;
  for (auto& [index, json] : resume.finished_ahead) {
    finished_ahead.insert(index);
    output_->add(index, std::move(json));
  }
  output_->flush();  // the waiting file was restarted: what it held is durable again at once
  last_flush_ = Clock::now();
  metrics_ = std::make_unique<io::RecordWriter>((std::filesystem::path(o_.output_dir) / metrics_file_name(o_.rank)).string(),
                                                io::RecordWriter::Options{.level = 3, .records_per_frame = 256});
  admission_.emplace(Admission::Options{.inputs = o_.inputs,
                                        .parse = {.vocab_size = o_.vocab_size, .tokenizer = o_.tokenizer, .bos_token_id = o_.bos_token_id},
                                        .rank = o_.rank,
                                        .world_size = o_.world_size,
                                        .skip = resume.records_done,
                                        .finished_ahead = std::move(finished_ahead),
                                        .window = static_cast<std::size_t>(std::max(2 * o_.scheduler.max_num_seqs, 16)),
                                        .job_seed = o_.seed},
                     [this](int64_t index, const ResultRecord& record) { write_record(index, record); });
}

bool GenerateJob::stop_requested() const { return o_.stop_requested && o_.stop_requested->load(); }

double GenerateJob::elapsed_s() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

bool GenerateJob::deadline_passed() const { return o_.deadline_s && !deadline_hit_ && elapsed_s() >= *o_.deadline_s; }

// The deadline: what runs is cancelled through the scheduler's cancellation order (abort),
// what was not admitted gets an abort record, and nothing is admitted any more.
void GenerateJob::abort_what_is_left() {
  deadline_hit_ = true;
  for (engine::SeqId id : scheduler_.unfinished_ids()) scheduler_.cancel(id);
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%g", *o_.deadline_s);
  admission_->abort_rest(std::string("job deadline of ") + seconds + " s reached before the request started");
}

// Whether to run another step. Multi-rank: every rank takes the same branch (the flags are agreed).
bool GenerateJob::another_step(bool stopping) {
  const bool busy = scheduler_.has_unfinished() || !admission_->input_done();
  if (!o_.lockstep) return busy;
  const LockstepFlags all = o_.lockstep({.busy = busy, .stop = stopping});
  if (all.stop) interrupted_ = true;
  return !all.stop && all.busy;
}

// Right after Scheduler::process committed a step's tokens: the commit point of each token.
void GenerateJob::on_processed(const engine::ExecutedStep& step, const std::vector<engine::CommittedToken>& committed,
                               const StepTiming& timing) {
  keep_prompt_logprobs(step);
  const auto now = Clock::now();
  for (const auto& token : committed) {
    auto it = live_.find(token.seq_id);
    if (it == live_.end()) continue;
    LiveRequest& request = it->second;
    if (token.output_index == 0 && !request.first_token) request.first_token = now;
    if (request.logprobs) {
      const auto row = static_cast<std::size_t>(token.result_row);
      ENGINE_ASSERT(row < step.logprobs.size() && step.logprobs[row], "request ", token.seq_id, " asked for logprobs, step ",
                    step.result.step, " has none for its row ", row);
      request.logprobs->push_back(*step.logprobs[row]);
    }
    if (!request.text) continue;
    // A stop string ends the request here, keeping every token up to this one; a step already
    // in flight is discarded. Below min_tokens it does not count (the engine's stop rule).
    const bool may_stop = scheduler_.find(token.seq_id)->params().may_stop_at(token.output_index);
    if (request.text->push(token.token_id, may_stop)) scheduler_.terminate(token.seq_id, engine::FinishReason::kStop, "stop string");
  }
  const double t_s = elapsed_s();
  metrics_->append(step_metrics_json(timing, static_cast<int64_t>(committed.size()), t_s));
  if (o_.on_step) o_.on_step(timing, t_s);
}

// The prompt logprobs a step computed, each position's first value kept. A step still counts
// when its sequence was preempted (or finished) meanwhile: it ran on that epoch's own state,
// written by earlier steps of the stream, and a recomputed prompt then adds nothing.
void GenerateJob::keep_prompt_logprobs(const engine::ExecutedStep& step) {
  for (const engine::PromptLogprobs& scored : step.prompt_logprobs) {
    auto it = live_.find(scored.seq_id);
    if (it == live_.end() || !it->second.prompt_logprobs) continue;
    std::vector<std::optional<engine::RowLogprobs>>& rows = it->second.prompt_logprobs->rows;
    for (std::size_t i = 0; i < scored.rows.size(); ++i) {
      const std::size_t position = static_cast<std::size_t>(scored.first_position) + i;
      ENGINE_ASSERT(position > 0 && position < rows.size(), "request ", scored.seq_id, ": prompt logprob for position ", position,
                    " of a prompt of ", rows.size());
      if (!rows[position]) rows[position] = scored.rows[i];
    }
  }
}

void GenerateJob::collect_finished() {
  for (auto& seq : scheduler_.take_finished()) {
    auto it = live_.find(seq->id());
    ENGINE_ASSERT(it != live_.end(), "finished sequence ", seq->request_id(), " is unknown to the job");
    const ResultRecord record = finished_record(*seq, it->second);
    // A request the scheduler refused never ran: its tokens are not throughput.
    if (seq->finish_reason() != engine::FinishReason::kError) stats_.count_finished(*seq, it->second, Clock::now());
    write_record(it->second.index, record);
    live_.erase(it);
  }
}

void GenerateJob::write_record(int64_t index, const ResultRecord& record) {
  stats_.count_record(record);
  output_->add(index, to_json(record));
}

void GenerateJob::flush_if_due() {
  const auto now = Clock::now();
  if (std::chrono::duration<double>(now - last_flush_).count() < o_.flush_interval_s) return;
  output_->flush();
  metrics_->flush();
  last_flush_ = now;
}

ProgressFigures GenerateJob::progress_figures() const {
  const auto& totals = scheduler_.metrics().totals();
  return {.rank = o_.rank,
          .elapsed_s = elapsed_s(),
          .done = output_->next_index(),
          .done_before = records_before_,
          .waiting = static_cast<int64_t>(output_->buffered()),
          .read = admission_->items_read(),
          .bytes_read = admission_->bytes_read(),
          .total_bytes = admission_->total_bytes(),
          .prompt_tokens = stats_.prompt_tokens(),
          .output_tokens = totals.num_committed_tokens,
          .blocks = scheduler_.block_snapshot(),
          .slots = scheduler_.slot_snapshot(),
          .preemptions = totals.num_preemptions};
}

JobOutcome GenerateJob::finish() {
  JobOutcome outcome;
  outcome.interrupted = interrupted_;
  stats_.fill(outcome);
  outcome.steps = scheduler_.metrics().totals().num_steps;
  outcome.preemptions = scheduler_.metrics().totals().num_preemptions;
  outcome.elapsed_s = elapsed_s();
  metrics_->close();
  progress_.report(/*final=*/true, [this] { return progress_figures(); });
  if (interrupted_) {
    output_->flush();  // complete records stay; the file stays .partial for --resume
  } else {
    output_->close(admission_->items_read());
  }
  outcome.records = output_->next_index();
  return outcome;
}

}  // namespace deepinfer::pipeline
