#include "pipeline/result_record.h"

#include "io/json_writer.h"

namespace deepinfer::pipeline {

namespace {

// [{"token": ID, "logprob": X, "top": [[ID, X], ...]}, ...], one per output token; floats in
// their shortest round-trip form, so equal values give equal bytes.
io::JsonWriter& write_logprobs(io::JsonWriter& w, const std::vector<int32_t>& tokens, const std::vector<engine::RowLogprobs>& logprobs) {
  w.begin_array();
  for (std::size_t i = 0; i < logprobs.size(); ++i) {
    const engine::RowLogprobs& row = logprobs[i];
    w.begin_object().key("token").value(static_cast<int64_t>(tokens[i])).key("logprob").value(row.logprob).key("top").begin_array();
    for (std::size_t k = 0; k < row.top_ids.size(); ++k)
      w.begin_array().value(static_cast<int64_t>(row.top_ids[k])).value(row.top_logprobs[k]).end_array();
    w.end_array().end_object();
  }
  return w.end_array();
}

// [null, {"token": ID, "logprob": X, "top": [[ID, X], ...]}, ...], one per prompt token, null where
// there is none (position 0).
io::JsonWriter& write_prompt_logprobs(io::JsonWriter& w, const PromptLogprobsField& prompt) {
  w.begin_array();
  for (std::size_t p = 0; p < prompt.rows.size(); ++p) {
    if (!prompt.rows[p]) {
      w.null();
      continue;
    }
    const engine::RowLogprobs& row = *prompt.rows[p];
    w.begin_object().key("token").value(static_cast<int64_t>(prompt.tokens[p])).key("logprob").value(row.logprob).key("top").begin_array();
    for (std::size_t k = 0; k < row.top_ids.size(); ++k)
      w.begin_array().value(static_cast<int64_t>(row.top_ids[k])).value(row.top_logprobs[k]).end_array();
    w.end_array().end_object();
  }
  return w.end_array();
}

}  // namespace

std::string to_json(const ResultRecord& r) {
  io::JsonWriter w;
  w.begin_object();
  w.key("id").value(r.id);
  w.key("input").begin_object().key("file").value(r.input.file).key("line").value(r.input.line).end_object();
  w.key("api");
  r.api ? w.value(*r.api) : w.null();
  w.key("seed");
  r.seed ? w.value(*r.seed) : w.null();
  w.key("finish_reason").value(r.finish_reason);
  w.key("stop_reason");
  r.stop_reason ? w.value(*r.stop_reason) : w.null();
  w.key("error");
  r.error ? w.value(*r.error) : w.null();
  w.key("num_prompt_tokens").value(r.num_prompt_tokens);
  w.key("output_token_ids").array(r.output_token_ids);
  w.key("text");
  r.text ? w.value(*r.text) : w.null();
  w.key("logprobs");
  r.logprobs ? write_logprobs(w, r.output_token_ids, *r.logprobs) : w.null();
  w.key("prompt_logprobs");
  r.prompt_logprobs ? write_prompt_logprobs(w, *r.prompt_logprobs) : w.null();
  w.key("steps").begin_object();
  w.key("prefill_chunks").value(r.prefill_chunks);
  w.key("first_token_step");
  r.first_token_step ? w.value(*r.first_token_step) : w.null();
  w.key("finish_step");
  r.finish_step ? w.value(*r.finish_step) : w.null();
  w.key("preemptions").value(r.preemptions);
  w.end_object();
  w.end_object();
  return w.take();
}

ResultRecord error_record(const io::RequestError& error) {
  ResultRecord r;
  r.id = error.id;
  r.input = error.input;
  r.finish_reason = "error";
  r.error = error.message;
  return r;
}

}  // namespace deepinfer::pipeline
