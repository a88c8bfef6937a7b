#include "pipeline/record_builder.h"

#include "engine/check.h"

namespace deepinfer::pipeline {
namespace {

std::optional<int64_t> step_or_null(int64_t step) { return step >= 0 ? std::optional<int64_t>(step) : std::nullopt; }

void add_output_text(io::OutputText& text, const engine::Sequence& seq, ResultRecord& record) {
  ENGINE_ASSERT(text.num_tokens() == seq.num_output_tokens(), "request ", seq.request_id(), ": ", text.num_tokens(), " tokens decoded, ",
                seq.num_output_tokens(), " committed");
  record.text = text.finish();
  if (text.stopped()) {
    record.finish_reason = "stop";
    record.stop_reason = text.stop_string();
  }
}

}  // namespace

ResultRecord finished_record(const engine::Sequence& seq, LiveRequest& request) {
  const auto& m = seq.metrics();
  ResultRecord record{.id = seq.request_id(),
                      .input = request.input,
                      .api = request.api,
                      .seed = request.seed,
                      .finish_reason = std::string(engine::finish_reason_name(seq.finish_reason())),
                      .stop_reason = std::nullopt,
                      .error = std::nullopt,
                      .num_prompt_tokens = seq.num_prompt_tokens(),
                      .output_token_ids = {seq.output_token_ids().begin(), seq.output_token_ids().end()},
                      .text = std::nullopt,
                      .logprobs = std::nullopt,
                      .prompt_logprobs = std::nullopt,
                      .prefill_chunks = m.num_prefill_chunks,
                      .first_token_step = step_or_null(m.first_token_step),
                      .finish_step = step_or_null(m.finish_step),
                      .preemptions = m.num_preemptions};
  const bool failed = seq.finish_reason() == engine::FinishReason::kError || seq.finish_reason() == engine::FinishReason::kAbort;
  if (failed && !seq.finish_message().empty()) record.error = seq.finish_message();
  if (seq.finish_reason() == engine::FinishReason::kError)  // data errors name their line, as the reader's do
    record.error =
        request.input.file + ":" + std::to_string(request.input.line) + ": " + record.error.value_or("rejected by the scheduler");
  if (request.text && seq.finish_reason() != engine::FinishReason::kError) add_output_text(*request.text, seq, record);
  if (request.logprobs) {
    ENGINE_ASSERT(request.logprobs->size() == record.output_token_ids.size(), "request ", seq.request_id(), ": ", request.logprobs->size(),
                  " logprobs for ", record.output_token_ids.size(), " tokens");
    record.logprobs = std::move(*request.logprobs);
  }
  if (request.prompt_logprobs) record.prompt_logprobs = std::move(*request.prompt_logprobs);
  return record;
}

ResultRecord rejected_record(const io::RequestLine& request, const std::string& error) {
  ResultRecord record;
  record.id = request.id;
  record.input = request.input;
  record.api = request.api;
  record.num_prompt_tokens = static_cast<int64_t>(request.prompt_token_ids.size());  // `cat` inverts the sharding by it
  record.finish_reason = "error";
  record.error = error;
  return record;
}

ResultRecord not_started_record(const io::RequestItem& item, const std::string& error, bool with_text) {
  if (const auto* rejected = std::get_if<io::RequestError>(&item)) return error_record(*rejected);
  ResultRecord record = rejected_record(std::get<io::RequestLine>(item), error);
  record.finish_reason = "abort";
  if (with_text) record.text = "";
  return record;
}

}  // namespace deepinfer::pipeline
