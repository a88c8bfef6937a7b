#include "pipeline/generate_job.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <stdexcept>

#include "engine/sampler_noise.h"
#include "io/json_writer.h"
#include "io/output_text.h"
#include "io/record_file.h"
#include "pipeline/job_files.h"
#include "pipeline/ordered_output.h"
#include "pipeline/result_record.h"
#include "pipeline/step_loop.h"

namespace deepinfer::pipeline {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

// What the job remembers of a request while the scheduler holds it.
struct LiveRequest {
  int64_t index = 0;  // position in this rank's input order
  io::InputLocation input;
  uint64_t seed = 0;
  Clock::time_point added;
  std::optional<Clock::time_point> first_token;
  std::optional<io::OutputText> text;  // with a tokenizer: fed every committed token
};

engine::SamplingParams to_sampling_params(const io::RequestLine& request, uint64_t seed) {
  engine::SamplingParams params;
  params.max_tokens = static_cast<int32_t>(request.max_tokens);
  params.temperature = static_cast<float>(request.temperature);
  params.top_p = static_cast<float>(request.top_p);
  params.top_k = static_cast<int32_t>(request.top_k);
  params.min_p = static_cast<float>(request.min_p);
  params.seed = seed;
  params.stop_token_ids = request.stop_token_ids;
  params.ignore_eos = request.ignore_eos;
  params.min_tokens = static_cast<int32_t>(request.min_tokens);
  params.logprobs = request.logprobs > 0 ? static_cast<int32_t>(request.logprobs) : -1;
  return params;
}

// Every reader of the job parses alike: the sharding depends on the prompts' token counts.
io::RequestReader::Options reader_options(const JobOptions& o) {
  return {.parse = {.vocab_size = o.vocab_size, .tokenizer = o.tokenizer, .bos_token_id = o.bos_token_id}};
}

// The record's "text"; a stop string found makes the finish reason "stop" with the string as
// stop_reason (also when the same token reached max_tokens, as in vLLM).
void add_output_text(io::OutputText& text, const engine::Sequence& seq, ResultRecord& record) {
  if (text.num_tokens() != seq.num_output_tokens())
    throw std::logic_error("request " + seq.request_id() + ": " + std::to_string(text.num_tokens()) + " tokens decoded, " +
                           std::to_string(seq.num_output_tokens()) + " committed");
  record.text = text.finish();
  if (text.stopped()) {
    record.finish_reason = "stop";
    record.stop_reason = text.stop_string();
  }
}

// Input items this rank owns (for progress and ETA): one parsing pass over the input.
int64_t count_owned_lines(const JobOptions& o) {
  if (o.world_size == 1) {  // every item is owned: no need to tokenize
    int64_t lines = 0;
    io::RequestReader reader(o.inputs, {.parse = {.vocab_size = o.vocab_size}});
    for (io::RequestItem item; reader.next(&item);) ++lines;
    return lines;
  }
  OwnerRank owner(o.world_size);
  int64_t owned = 0;
  io::RequestReader reader(o.inputs, reader_options(o));
  for (io::RequestItem item; reader.next(&item);) owned += owner.next(sharding_tokens(item)) == o.rank;
  return owned;
}

std::string format_duration(double seconds) {
  char text[32];
  const auto s = static_cast<int64_t>(seconds);
  if (s >= 3600) std::snprintf(text, sizeof(text), "%ldh%02ldm", long(s / 3600), long(s / 60 % 60));
  else std::snprintf(text, sizeof(text), "%ldm%02lds", long(s / 60), long(s % 60));
  return text;
}

}  // namespace

OwnerRank::OwnerRank(int world_size) : load_(static_cast<std::size_t>(world_size), 0) {
  if (world_size < 1) throw std::invalid_argument("OwnerRank: world size " + std::to_string(world_size));
}

int OwnerRank::peek() const {
  return static_cast<int>(std::min_element(load_.begin(), load_.end()) - load_.begin());  // first minimum: lowest rank
}

int OwnerRank::next(int64_t prompt_tokens) {
  const int rank = peek();
  load_[static_cast<std::size_t>(rank)] += 1 + prompt_tokens;
  return rank;
}

int64_t sharding_tokens(const io::RequestItem& item) {
  const auto* request = std::get_if<io::RequestLine>(&item);
  return request ? static_cast<int64_t>(request->prompt_token_ids.size()) : 0;
}

JobOutcome run_generate_job(const JobOptions& o, engine::StepExecutor& executor) {
  const auto start = Clock::now();
  JobOutcome outcome;
  ResumeState resume = open_results(o.output_dir, o.rank, o.world_size, o.job_json, o.resume, {});
  outcome.records = resume.records_done;
  if (resume.results_complete) {
    // Resumed with nothing left: in a multi-rank job this rank still joins every step.
    while (o.lockstep) {
      const LockstepFlags all = o.lockstep({.busy = false, .stop = o.stop_requested && o.stop_requested->load()});
      if (all.stop) outcome.interrupted = true;
      if (all.stop || !all.busy) break;
      executor.execute_dummy();
    }
    return outcome;
  }
  const int64_t total = count_owned_lines(o);
  OwnerRank owner(o.world_size);

  OrderedOutput output(std::move(resume.writer), resume.records_done);
  io::RecordWriter metrics((std::filesystem::path(o.output_dir) / metrics_file_name(o.rank)).string(),
                           {.level = 3, .records_per_frame = 256});
  engine::Scheduler scheduler(o.scheduler);
  io::RequestReader reader(o.inputs, reader_options(o));
  std::map<engine::SeqId, LiveRequest> live;
  int64_t local_index = 0;
  bool input_done = false, deadline_hit = false;
  double ttft_sum = 0, tpot_sum = 0;
  int64_t ttft_count = 0, tpot_count = 0;
  std::map<std::string, int64_t> reasons;
  const std::size_t window = static_cast<std::size_t>(std::max(2 * o.scheduler.max_num_seqs, 16));

  // The next item of this rank's input, skipping what a resumed run already wrote.
  auto next_owned = [&](io::RequestItem* item, int64_t* index) {
    while (reader.next(item)) {
      if (owner.next(sharding_tokens(*item)) != o.rank) continue;
      *index = local_index++;
      if (*index >= resume.records_done) return true;
    }
    input_done = true;
    return false;
  };
  auto write_record = [&](int64_t index, const ResultRecord& record) {
    ++reasons[record.finish_reason];
    output.add(index, to_json(record));
  };
  auto admit = [&] {
    io::RequestItem item;
    int64_t index;
    while (!input_done && scheduler.waiting().size() < window && next_owned(&item, &index)) {
      if (const auto* error = std::get_if<io::RequestError>(&item)) {
        write_record(index, error_record(*error));
        continue;
      }
      auto& request = std::get<io::RequestLine>(item);
      const uint64_t seed = request.seed ? *request.seed : engine::derive_request_seed(o.seed, request.id);
      const engine::SeqId id = scheduler.add_request(request.id, std::move(request.prompt_token_ids), to_sampling_params(request, seed));
      auto& added = live.emplace(id, LiveRequest{index, request.input, seed, Clock::now(), std::nullopt, std::nullopt}).first->second;
      if (o.tokenizer) added.text.emplace(o.tokenizer, io::OutputText::Options{.stop = std::move(request.stop)});
    }
  };
  auto collect_finished = [&] {
    for (auto& seq : scheduler.take_finished()) {
      auto it = live.find(seq->id());
      if (it == live.end()) throw std::logic_error("finished sequence " + seq->request_id() + " is unknown to the job");
      const LiveRequest& req = it->second;
      const auto& m = seq->metrics();
      ResultRecord record{.id = seq->request_id(),
                          .input = req.input,
                          .seed = req.seed,
                          .finish_reason = std::string(engine::finish_reason_name(seq->finish_reason())),
                          .stop_reason = std::nullopt,
                          .error = std::nullopt,
                          .num_prompt_tokens = seq->num_prompt_tokens(),
                          .output_token_ids = {seq->output_token_ids().begin(), seq->output_token_ids().end()},
                          .text = std::nullopt,
                          .prefill_chunks = m.num_prefill_chunks,
                          .first_token_step = m.first_token_step >= 0 ? std::optional<int64_t>(m.first_token_step) : std::nullopt,
                          .finish_step = m.finish_step >= 0 ? std::optional<int64_t>(m.finish_step) : std::nullopt,
                          .preemptions = m.num_preemptions};
      const bool failed = seq->finish_reason() == engine::FinishReason::kError || seq->finish_reason() == engine::FinishReason::kAbort;
      if (failed && !seq->finish_message().empty()) record.error = seq->finish_message();
      if (it->second.text && seq->finish_reason() != engine::FinishReason::kError) add_output_text(*it->second.text, *seq, record);
      ++outcome.requests_run;
      outcome.prompt_tokens += seq->num_prompt_tokens();
      outcome.output_tokens += seq->num_output_tokens();
      if (req.first_token) {
        ttft_sum += std::chrono::duration<double, std::milli>(*req.first_token - req.added).count();
        ++ttft_count;
        if (seq->num_output_tokens() >= 2) {
          tpot_sum += std::chrono::duration<double, std::milli>(Clock::now() - *req.first_token).count() / (seq->num_output_tokens() - 1);
          ++tpot_count;
        }
      }
      write_record(req.index, record);
      live.erase(it);
    }
  };
  auto on_processed = [&](const engine::ExecutedStep&, const std::vector<engine::CommittedToken>& committed, const StepTiming& timing) {
    const auto now = Clock::now();
    for (const auto& token : committed) {
      auto it = live.find(token.seq_id);
      if (it == live.end()) continue;
      if (token.output_index == 0 && !it->second.first_token) it->second.first_token = now;
      // The commit point of this token (process of its step): a stop string ends the request
      // here, keeping every token up to this one; a step already in flight is discarded.
      if (!it->second.text) continue;
      const bool may_stop = scheduler.find(token.seq_id)->params().may_stop_at(token.output_index);  // the stop rule: min_tokens
      if (it->second.text->push(token.token_id, may_stop)) scheduler.terminate(token.seq_id, engine::FinishReason::kStop, "stop string");
    }
    io::JsonWriter w;
    w.begin_object().key("step").value(timing.step).key("kind").value(engine::step_kind_name(timing.kind));
    w.key("seqs").value(timing.num_seqs).key("tokens").value(timing.num_batched_tokens);
    w.key("committed").value(static_cast<int64_t>(committed.size()));
    w.key("schedule_ms").value(timing.schedule_ms).key("wait_ms").value(timing.wait_ms).key("process_ms").value(timing.process_ms);
    w.key("t_s").value(seconds_since(start)).end_object();
    metrics.append(w.str());
  };

  StepLoop loop(scheduler, executor, o.overlap, on_processed, /*lockstep=*/static_cast<bool>(o.lockstep));
  auto last_progress = Clock::now();
  auto report = [&](bool final) {
    if (!o.progress || (!final && seconds_since(last_progress) < o.progress_interval_s)) return;
    last_progress = Clock::now();
    const double elapsed = seconds_since(start);
    const int64_t done = output.next_index();
    const double rate = (done - resume.records_done) / std::max(elapsed, 1e-9);
    const auto blocks = scheduler.block_snapshot();
    const auto slots = scheduler.slot_snapshot();
    char line[512];
    std::snprintf(line, sizeof(line),
                  "[rank %d] %ld/%ld requests | in %.0f tok/s, out %.0f tok/s | blocks %d/%d, slots %d/%d | preemptions %ld | ETA %s",
                  o.rank, long(done), long(total), outcome.prompt_tokens / std::max(elapsed, 1e-9),
                  scheduler.metrics().totals().num_committed_tokens / std::max(elapsed, 1e-9), blocks.num_used, blocks.num_usable,
                  slots.num_used, slots.num_usable, long(scheduler.metrics().totals().num_preemptions),
                  rate > 0 ? format_duration((total - done) / rate).c_str() : "?");
    o.progress(line);
  };

  for (;;) {
    bool stopping = o.stop_requested && o.stop_requested->load();
    if (stopping && !o.lockstep) {
      outcome.interrupted = true;
      break;
    }
    if (o.deadline_s && !deadline_hit && seconds_since(start) >= *o.deadline_s) {
      deadline_hit = true;
      for (engine::SeqId id : scheduler.unfinished_ids()) scheduler.cancel(id);
      io::RequestItem item;
      int64_t index;
      while (next_owned(&item, &index)) {
        ResultRecord record;
        if (const auto* error = std::get_if<io::RequestError>(&item)) {
          record = error_record(*error);
        } else {
          record.id = std::get<io::RequestLine>(item).id;
          record.input = std::get<io::RequestLine>(item).input;
          record.num_prompt_tokens = static_cast<int32_t>(sharding_tokens(item));  // `cat` inverts the sharding by it
          record.finish_reason = "abort";
          record.error = "job deadline of " + std::to_string(*o.deadline_s) + " s reached before the request started";
          if (o.tokenizer) record.text = "";
        }
        write_record(index, record);
      }
    }
    if (!deadline_hit && !stopping) admit();
    const bool busy = scheduler.has_unfinished() || !input_done;
    if (o.lockstep) {  // every rank takes the same branch: the flags are agreed
      const LockstepFlags all = o.lockstep({.busy = busy, .stop = stopping});
      if (all.stop) {
        outcome.interrupted = true;
        break;
      }
      if (!all.busy) break;
    } else if (!busy) {
      break;  // drain() below processes the step in flight
    }
    loop.step();
    collect_finished();
    report(false);
  }
  loop.drain();
  collect_finished();
  outcome.steps = scheduler.metrics().totals().num_steps;
  outcome.preemptions = scheduler.metrics().totals().num_preemptions;
  outcome.elapsed_s = seconds_since(start);
  outcome.mean_ttft_ms = ttft_count ? ttft_sum / ttft_count : 0;
  outcome.mean_tpot_ms = tpot_count ? tpot_sum / tpot_count : 0;
  for (const auto& [reason, count] : reasons) outcome.finish_reasons.push_back(reason + "=" + std::to_string(count));
  metrics.close();
  report(true);
  if (outcome.interrupted) {
    output.flush();  // complete records stay; the file stays .partial for --resume
  } else {
    output.close(local_index);
  }
  outcome.records = output.next_index();
  return outcome;
}

}  // namespace deepinfer::pipeline
