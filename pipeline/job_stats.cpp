#include "pipeline/job_stats.h"

#include "io/json_writer.h"

namespace deepinfer::pipeline {
namespace {

double ms_between(Clock::time_point from, Clock::time_point to) { return std::chrono::duration<double, std::milli>(to - from).count(); }

}  // namespace

void JobStats::count_finished(const engine::Sequence& seq, const LiveRequest& request, Clock::time_point now) {
  ++requests_run_;
  prompt_tokens_ += seq.num_prompt_tokens();
  output_tokens_ += seq.num_output_tokens();
  if (!request.first_token) return;
  ttft_sum_ms_ += ms_between(request.added, *request.first_token);
  ++ttft_count_;
  if (seq.num_output_tokens() >= 2) {
    tpot_sum_ms_ += ms_between(*request.first_token, now) / (seq.num_output_tokens() - 1);
    ++tpot_count_;
  }
}

void JobStats::fill(JobOutcome& outcome) const {
  outcome.requests_run = requests_run_;
  outcome.prompt_tokens = prompt_tokens_;
  outcome.output_tokens = output_tokens_;
  outcome.mean_ttft_ms = ttft_count_ ? ttft_sum_ms_ / ttft_count_ : 0;
  outcome.mean_tpot_ms = tpot_count_ ? tpot_sum_ms_ / tpot_count_ : 0;
  outcome.finish_reasons.clear();
  for (const auto& [reason, count] : finish_reasons_) outcome.finish_reasons.push_back(reason + "=" + std::to_string(count));
}

std::string step_metrics_json(const StepTiming& timing, int64_t committed, double t_s) {
  io::JsonWriter w;
  w.begin_object().key("step").value(timing.step).key("kind").value(engine::step_kind_name(timing.kind));
  w.key("seqs").value(timing.num_seqs).key("tokens").value(timing.num_batched_tokens).key("context").value(timing.context_tokens);
  w.key("committed").value(committed);
  w.key("schedule_ms").value(timing.schedule_ms).key("execute_ms").value(timing.execute_ms);
  w.key("wait_ms").value(timing.wait_ms).key("process_ms").value(timing.process_ms);
  w.key("t_s").value(t_s).end_object();
  return w.take();
}

}  // namespace deepinfer::pipeline
