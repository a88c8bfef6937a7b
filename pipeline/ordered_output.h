#pragma once
// Writes results in input order although requests finish out of order: a finished record
// waits until every earlier input index of this rank has been written. Memory is bounded by
// the in-flight window (what the scheduler holds), not by the input size. The results file
// frames every records_per_frame records, so its bytes do not depend on timing; flush() makes
// every record added so far durable without a frame: it fsyncs the results file and replaces
// the waiting file (`<index> <record>` lines; written whole, fsynced, renamed) with the records
// not yet in a frame and those that wait for an earlier one. --resume reads it back
// (job_files.h), so a kill loses only what was added since the last flush().
// Owns: the reorder buffer, the results file's writer and the waiting file. Does not own: the
// records' content, when to flush (the job's timer).

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/record_file.h"

namespace deepinfer::pipeline {

class OrderedOutput final {
 public:
  // Continues after `first_index` records already in the results file (0 for a fresh run);
  // the waiting file lives at `waiting_path`.
  OrderedOutput(std::unique_ptr<io::RecordWriter> writer, int64_t first_index, std::string waiting_path);

  void add(int64_t index, std::string json);  // index: position in this rank's input order
  int64_t next_index() const { return next_index_; }
  std::size_t buffered() const { return pending_.size(); }
  // fsyncs the results file's frames, then replaces the waiting file: every record added so
  // far is in one of the two.
  void flush();
  // Requires every index below `end` written; renames the results file into place and removes
  // the waiting file.
  void close(int64_t end);

 private:
  std::unique_ptr<io::RecordWriter> writer_;
  int64_t next_index_;
  std::map<int64_t, std::string> pending_;                 // waiting for an earlier index
  std::vector<std::pair<int64_t, std::string>> unframed_;  // appended to writer_, not yet in a frame
  std::string waiting_path_;
};

// A line of the waiting file, and back (false if it is not one).
std::string waiting_line(int64_t index, const std::string& json);
bool parse_waiting_line(const std::string& line, int64_t* index, std::string* json);

}  // namespace deepinfer::pipeline
