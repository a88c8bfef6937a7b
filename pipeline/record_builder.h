#pragma once
// The ResultRecord of each way a request ends: finished by the scheduler (stop, length, abort,
// error), or never started because the job's deadline passed first. Lines the reader rejected
// use error_record (result_record.h).
// Owns: the mapping of a request's end to its record's fields. Does not own: serialization
// (result_record.h), the order of records (ordered_output.h).

#include <string>

#include "engine/sequence.h"
#include "io/request_reader.h"
#include "pipeline/live_request.h"
#include "pipeline/result_record.h"

namespace deepinfer::pipeline {

// A finished sequence with what the job remembers of it. With output text, the record gets
// "text"; a stop string found makes the finish reason "stop" with the string as stop_reason
// (also when the same token reached max_tokens, as in vLLM). Finishes request.text.
ResultRecord finished_record(const engine::Sequence& seq, LiveRequest& request);

// A parsed request the job refuses before it runs (it cannot fit max-model-len): "error"
// with `error`, which names FILE:LINE. num_prompt_tokens is set, since `cat` replays the
// sharding by it.
ResultRecord rejected_record(const io::RequestLine& request, const std::string& error);

// An input item not started when the deadline passed: "abort" with `error` (a reader error
// keeps its error record). num_prompt_tokens is set, since `cat` replays the sharding by it.
ResultRecord not_started_record(const io::RequestItem& item, const std::string& error, bool with_text);

}  // namespace deepinfer::pipeline
