#pragma once
// `deepinfer cat --format openai`: a result record as a line of an OpenAI batch output file:
//   {"id": "batch_req_N", "custom_id": ID, "response": {"status_code": 200, "request_id": "req_N",
//    "body": BODY}, "error": null}
// BODY is a completion ("object": "text_completion", choices[0].text) for native and
// /v1/completions lines, a chat completion ("object": "chat.completion", choices[0].message) for
// /v1/chat/completions lines; with thinking, the text before the first "</think>" is the
// message's "reasoning_content" and the rest its "content". "usage" counts prompt and output
// tokens; "logprobs" carries the record's token ids and logprobs (null when not asked). A
// record that failed ("error", "abort") becomes status_code 400 with {"error": {"message",
// "type"}}. N is the record's 1-based place in the global input order, so the output is
// deterministic. Owns: that mapping. Does not own: the record format (result_record.h).

#include <cstdint>
#include <string>

namespace deepinfer::pipeline {

// Throws std::runtime_error when `record` is not a result record.
std::string openai_batch_line(const std::string& record, int64_t n);

}  // namespace deepinfer::pipeline
