#pragma once
// Shared by the pipeline's job tests: a small job over the fake executor (CPU, no model) and
// its results, parsed.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <simdjson.h>

#include "io/record_file.h"
#include "pipeline/generate_job.h"
#include "pipeline/ordered_output.h"
#include "tests/pipeline/fake_step_executor.h"

namespace deepinfer::pipeline::testing {

constexpr int32_t kVocab = 64;

inline JobOptions options_for(const std::string& input, const std::string& out, int32_t num_blocks) {
  JobOptions o;
  o.inputs = {input};
  o.output_dir = out;
  o.seed = 42;
  o.scheduler = {.block_size = 16,
                 .num_blocks = num_blocks,
                 .num_slots = 9,
                 .max_num_seqs = 8,
                 .max_num_batched_tokens = 256,
                 .max_model_len = 512,
                 .eos_token_id = 1};
  o.vocab_size = kVocab;
  o.job_json = "{\"test\":1}";
  return o;
}

inline engine::FakeExecutor::Options fake_for(const JobOptions& o) {
  return {.block_size = o.scheduler.block_size,
          .num_blocks = o.scheduler.num_blocks,
          .num_slots = o.scheduler.num_slots,
          .vocab_size = static_cast<int32_t>(o.vocab_size),
          .delay_steps = 0};
}

inline JobOutcome run(const JobOptions& o, const std::function<void(const engine::SchedulerOutput&)>& hook = nullptr) {
  FakeStepExecutor executor(fake_for(o));
  executor.on_execute = hook;
  return GenerateJob(o, executor).run();
}

inline std::vector<std::string> results(const std::string& out) { return io::read_all_records(out + "/results-00000-of-00001.jsonl.zst"); }

struct Result {
  std::string id, finish_reason;
  std::optional<std::string> stop_reason, text;
  std::vector<int32_t> ids;
  int64_t num_prompt_tokens = 0;
};

inline Result parse_result(const std::string& record) {
  simdjson::dom::parser parser;
  const simdjson::dom::element r = parser.parse(record);
  Result out;
  out.id = std::string(r["id"].get_string().value());
  out.finish_reason = std::string(r["finish_reason"].get_string().value());
  if (!r["stop_reason"].is_null()) out.stop_reason = std::string(r["stop_reason"].get_string().value());
  if (!r["text"].is_null()) out.text = std::string(r["text"].get_string().value());
  for (const int64_t id : r["output_token_ids"].get_array()) out.ids.push_back(static_cast<int32_t>(id));
  out.num_prompt_tokens = r["num_prompt_tokens"].get_int64().value();
  return out;
}

inline std::vector<Result> parsed_results(const std::string& out) {
  std::vector<Result> parsed;
  for (const auto& record : results(out)) parsed.push_back(parse_result(record));
  return parsed;
}

// What a stopped or killed run kept in `out`: the results file's complete records, then those
// of the waiting file past them (ordered_output.h).
inline std::vector<std::string> kept_records(const std::string& out) {
  std::vector<std::string> kept;
  const std::string results = out + "/results-00000-of-00001.jsonl.zst.partial", waiting = out + "/waiting-00000-of-00001.jsonl.zst";
  std::string line, json;
  if (std::filesystem::exists(results)) {
    io::RecordReader reader(results, /*recover=*/true);
    while (reader.next(&line)) kept.push_back(line);
  }
  const auto in_order = static_cast<int64_t>(kept.size());
  if (std::filesystem::exists(waiting)) {
    io::RecordReader reader(waiting, /*recover=*/true);
    int64_t index = 0;
    while (reader.next(&line))
      if (parse_waiting_line(line, &index, &json) && index >= in_order) kept.push_back(json);
  }
  return kept;
}

}  // namespace deepinfer::pipeline::testing
