#pragma once
// Writes results in input order although requests finish out of order: a finished record
// waits until every earlier input index of this rank has been written. Memory is bounded by
// the in-flight window (what the scheduler holds), not by the input size.
// Owns: the reorder buffer and the results file's writer. Does not own: the records' content.

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "io/record_file.h"

namespace deepinfer::pipeline {

class OrderedOutput final {
 public:
  // Continues after `first_index` records already in the file (0 for a fresh run).
  OrderedOutput(std::unique_ptr<io::RecordWriter> writer, int64_t first_index);

  void add(int64_t index, std::string json);  // index: position in this rank's input order
  int64_t next_index() const { return next_index_; }
  std::size_t buffered() const { return pending_.size(); }
  void flush() { writer_->flush(); }
  // Requires every index below `end` written; renames the file into place.
  void close(int64_t end);

 private:
  std::unique_ptr<io::RecordWriter> writer_;
  int64_t next_index_;
  std::map<int64_t, std::string> pending_;
};

}  // namespace deepinfer::pipeline
