#pragma once
// One line of results-*.jsonl.zst: what happened to one input line. Keys are written in a
// fixed order so the same outcome always gives the same bytes (README.md, "Inputs and outputs").
// Owns: the record's fields and serialization. Does not own: deciding the outcome.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/step_executor.h"
#include "io/request.h"

namespace deepinfer::pipeline {

// A prompt's logprobs: rows[p] is of tokens[p] given the tokens before it, with the top N there;
// none at position 0, and none where it was not computed (a request aborted in its prefill).
struct PromptLogprobsField {
  std::vector<int32_t> tokens;
  std::vector<std::optional<engine::RowLogprobs>> rows;  // [prompt length]
};

struct ResultRecord {
  std::string id;
  io::InputLocation input;
  std::optional<std::string> api;          // io::kApi*; null for a line that could not be read
  std::optional<uint64_t> seed;            // null for error records that never ran
  std::string finish_reason;               // "stop" | "length" | "abort" | "error"
  std::optional<std::string> stop_reason;  // the stop string that ended the request
  std::optional<std::string> error;        // message for "error" (and why for "abort")
  int64_t num_prompt_tokens = 0;
  std::vector<int32_t> output_token_ids;
  std::optional<std::string> text;  // decoded output (null: no tokenizer, or an error record)
  // Asked for by the request: per output token its id, logprob and the top N (null otherwise).
  std::optional<std::vector<engine::RowLogprobs>> logprobs;
  std::optional<PromptLogprobsField> prompt_logprobs;  // asked for by the request (null otherwise)
  int64_t prefill_chunks = 0;
  std::optional<int64_t> first_token_step;
  std::optional<int64_t> finish_step;
  int64_t preemptions = 0;
};

std::string to_json(const ResultRecord& record);

// The record of a line the reader rejected.
ResultRecord error_record(const io::RequestError& error);

}  // namespace deepinfer::pipeline
