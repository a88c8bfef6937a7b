#pragma once
// What the job remembers of a request while the scheduler holds it, keyed by its SeqId:
// its place in this rank's output, where it came from, its seed, its timings and, with a
// tokenizer, its output text (fed every committed token).
// Owns: nothing but these fields. Made by admission.h, read by record_builder.h and job_stats.h.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/step_executor.h"
#include "engine/types.h"
#include "io/output_text.h"
#include "io/request.h"
#include "pipeline/result_record.h"

namespace deepinfer::pipeline {

using Clock = std::chrono::steady_clock;

struct LiveRequest {
  int64_t index = 0;  // position in this rank's input order
  io::InputLocation input;
  std::string api;  // io::kApi*: the form of the request line
  uint64_t seed = 0;
  Clock::time_point added;
  std::optional<Clock::time_point> first_token;
  std::optional<io::OutputText> text;
  // With "logprobs" asked: one entry per committed output token, in output order.
  std::optional<std::vector<engine::RowLogprobs>> logprobs;
  // With "prompt_logprobs" asked: the first value computed for each position (a prompt recomputed
  // after a preemption adds nothing).
  std::optional<PromptLogprobsField> prompt_logprobs;
};

using LiveRequests = std::map<engine::SeqId, LiveRequest>;

}  // namespace deepinfer::pipeline
