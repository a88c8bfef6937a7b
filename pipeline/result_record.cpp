#include "pipeline/result_record.h"

#include "io/json_writer.h"

namespace deepinfer::pipeline {

std::string to_json(const ResultRecord& r) {
  io::JsonWriter w;
  w.begin_object();
  w.key("id").value(r.id);
  w.key("input").begin_object().key("file").value(r.input.file).key("line").value(r.input.line).end_object();
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
