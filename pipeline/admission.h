#pragma once
// Admission: the reader -> scheduler side of the job. Reads the input once (every rank reads
// every line), keeps the items this rank owns (sharding.h) in its input order, skips those a
// resumed run already wrote, and adds requests to the scheduler while fewer than `window` wait,
// so memory follows the in-flight window, not the input size. A line the reader rejects becomes
// its error record at once.
// Owns: the reader, the sharding replay, this rank's input index, the request -> SamplingParams
// mapping (seeds derived from the job seed for unseeded requests) and each request's output
// text. Does not own: the scheduler, the records' order (ordered_output.h).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "io/request_reader.h"
#include "pipeline/live_request.h"
#include "pipeline/result_record.h"
#include "pipeline/sharding.h"

namespace deepinfer::pipeline {

class Admission final {
 public:
  struct Options {
    std::vector<std::string> inputs;
    // Alike on every rank: the sharding counts prompt tokens. With a tokenizer, each request
    // also gets its output text and stop strings.
    io::RequestParseOptions parse;
    int rank = 0;
    int world_size = 1;
    int64_t skip = 0;                  // items of this rank a resumed run already wrote
    std::set<int64_t> finished_ahead;  // later items it finished too (job_files.h ResumeState)
    std::size_t window = 16;           // waiting requests at most
    uint64_t job_seed = 0;
  };
  // Where records go: (this rank's input index, record).
  using WriteRecord = std::function<void(int64_t, const ResultRecord&)>;

  Admission(Options options, WriteRecord write);

  // Adds this rank's next requests to the scheduler and to `live` until `window` wait or the
  // input ends.
  void admit(engine::Scheduler& scheduler, LiveRequests& live);
  // Writes every item not admitted yet as not started, with `error` (the deadline).
  void abort_rest(const std::string& error);

  bool input_done() const { return input_done_; }
  int64_t items_read() const { return next_index_; }  // this rank's items so far (skipped ones included)
  int64_t bytes_read() const { return reader_.bytes_read(); }
  int64_t total_bytes() const { return reader_.total_bytes(); }

 private:
  bool next_owned(io::RequestItem* item, int64_t* index);
  void add(engine::Scheduler& scheduler, LiveRequests& live, io::RequestLine& request, int64_t index);

  Options options_;
  WriteRecord write_;
  io::RequestReader reader_;
  OwnerRank owner_;
  int64_t next_index_ = 0;
  bool input_done_ = false;
};

}  // namespace deepinfer::pipeline
