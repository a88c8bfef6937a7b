#pragma once
// Writes results in input order although requests finish out of order: a finished record
// waits until every earlier input index of this rank has been written. Memory is bounded by
// the in-flight window (what the scheduler holds), not by the input size. So that a kill loses
// only work in flight, a record that waits is also written at once to the waiting file
// (`<index> <record>` lines, a record file that is never renamed), which --resume reads back
// (job_files.h). flush() makes everything added so far durable.
// Owns: the reorder buffer, the results file's writer and the waiting file. Does not own: the
// records' content, when to flush (the job's timer).

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "io/record_file.h"

namespace deepinfer::pipeline {

class OrderedOutput final {
 public:
  // Continues after `first_index` records already in the results file (0 for a fresh run);
  // starts the waiting file at `waiting_path` (+ ".partial") empty.
  OrderedOutput(std::unique_ptr<io::RecordWriter> writer, int64_t first_index, std::string waiting_path);

  void add(int64_t index, std::string json);  // index: position in this rank's input order
  int64_t next_index() const { return next_index_; }
  std::size_t buffered() const { return pending_.size(); }
  // The results file's new records, then the waiting records (when none waits any more, the
  // waiting file restarts empty), each fsynced, in that order: a record is always in one of them.
  void flush();
  // Requires every index below `end` written; renames the results file into place and removes
  // the waiting file.
  void close(int64_t end);

 private:
  std::unique_ptr<io::RecordWriter> writer_;
  int64_t next_index_;
  std::map<int64_t, std::string> pending_;
  std::string waiting_path_;
  std::unique_ptr<io::RecordWriter> waiting_;
  int64_t waiting_written_ = 0;  // records in the waiting file since it last restarted
};

// A line of the waiting file, and back (false if it is not one).
std::string waiting_line(int64_t index, const std::string& json);
bool parse_waiting_line(const std::string& line, int64_t* index, std::string* json);

}  // namespace deepinfer::pipeline
