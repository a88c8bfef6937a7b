#include "pipeline/openai_output.h"

#include <stdexcept>
#include <string_view>

#include <simdjson.h>

#include "io/chat_format.h"
#include "io/json_writer.h"

namespace deepinfer::pipeline {
namespace {

using simdjson::dom::element;

std::string_view string_or_empty(element value) {
  std::string_view text;
  return value.get(text) ? std::string_view() : text;
}

// choices[0].logprobs: the record's logprobs as ids (cat has no tokenizer), or null.
void write_logprobs(io::JsonWriter& w, element logprobs) {
  if (logprobs.is_null()) {
    w.null();
    return;
  }
  w.begin_object().key("token_ids").begin_array();
  for (element entry : logprobs.get_array()) w.value(entry["token"].get_int64().value());
  w.end_array().key("token_logprobs").begin_array();
  for (element entry : logprobs.get_array()) w.raw(simdjson::minify(entry["logprob"]));
  w.end_array().key("top_logprobs").begin_array();
  for (element entry : logprobs.get_array()) {
    w.begin_array();
    for (element pair : entry["top"].get_array())
      w.begin_object().key("token_id").raw(simdjson::minify(pair.at(0))).key("logprob").raw(simdjson::minify(pair.at(1))).end_object();
    w.end_array();
  }
  w.end_array().end_object();
}

// choices[0] of a chat completion: the message, split at "</think>" when the request thought.
void write_chat_message(io::JsonWriter& w, std::string_view text, bool thinking) {
  w.key("message").begin_object().key("role").value("assistant");
  if (!thinking) {
    w.key("content").value(text).key("reasoning_content").null();
  } else {
    const auto end = text.find(io::kThinkEnd);
    const std::string_view reasoning = end == std::string_view::npos ? text : text.substr(0, end);
    const std::string_view content =
        end == std::string_view::npos ? std::string_view() : text.substr(end + std::string_view(io::kThinkEnd).size());
    w.key("content").value(content).key("reasoning_content").value(reasoning);
  }
  w.end_object();
}

void write_body(io::JsonWriter& w, element r, int64_t n) {
  const std::string_view api = string_or_empty(r["api"]);
  const bool chat = api == "chat" || api == "chat-thinking";
  const int64_t prompt = r["num_prompt_tokens"].get_int64().value();
  const auto output = static_cast<int64_t>(r["output_token_ids"].get_array().size());
  w.begin_object().key("id").value((chat ? "chatcmpl-" : "cmpl-") + std::to_string(n));
  w.key("object").value(chat ? "chat.completion" : "text_completion").key("model").value("deepinfer");
  w.key("choices").begin_array().begin_object().key("index").value(0);
  if (chat) {
    write_chat_message(w, string_or_empty(r["text"]), api == "chat-thinking");
  } else {
    w.key("text").value(string_or_empty(r["text"]));
  }
  w.key("logprobs");
  write_logprobs(w, r["logprobs"]);
  // The record's prompt logprobs as they are, where asked (an extension, as vLLM's completions have).
  element prompt_logprobs;
  if (!r["prompt_logprobs"].get(prompt_logprobs) && !prompt_logprobs.is_null())
    w.key("prompt_logprobs").raw(simdjson::minify(prompt_logprobs));
  w.key("finish_reason").value(string_or_empty(r["finish_reason"])).end_object().end_array();
  w.key("usage").begin_object().key("prompt_tokens").value(prompt).key("completion_tokens").value(output);
  w.key("total_tokens").value(prompt + output).end_object().end_object();
}

}  // namespace

std::string openai_batch_line(const std::string& record, int64_t n) {
  simdjson::dom::parser parser;
  element r;
  if (parser.parse(record).get(r) || !r.is_object()) throw std::runtime_error("not a result record: " + record.substr(0, 200));
  const std::string_view finish = string_or_empty(r["finish_reason"]);
  const bool failed = finish == "error" || finish == "abort";
  io::JsonWriter w;
  w.begin_object().key("id").value("batch_req_" + std::to_string(n)).key("custom_id").value(string_or_empty(r["id"]));
  w.key("response").begin_object().key("status_code").value(failed ? 400 : 200).key("request_id").value("req_" + std::to_string(n));
  w.key("body");
  if (failed) {
    w.begin_object().key("error").begin_object().key("message").value(string_or_empty(r["error"]));
    w.key("type").value(finish == "abort" ? "aborted" : "invalid_request_error").end_object().end_object();
  } else {
    write_body(w, r, n);
  }
  w.end_object().key("error").null().end_object();
  return w.take();
}

}  // namespace deepinfer::pipeline
