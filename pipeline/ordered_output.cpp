#include "pipeline/ordered_output.h"

#include "engine/check.h"

namespace deepinfer::pipeline {

OrderedOutput::OrderedOutput(std::unique_ptr<io::RecordWriter> writer, int64_t first_index)
    : writer_(std::move(writer)), next_index_(first_index) {}

void OrderedOutput::add(int64_t index, std::string json) {
  ENGINE_ASSERT(index >= next_index_ && !pending_.count(index), "OrderedOutput: record ", index, " added twice");
  pending_.emplace(index, std::move(json));
  for (auto it = pending_.begin(); it != pending_.end() && it->first == next_index_; it = pending_.erase(it)) {
    writer_->append(it->second);
    ++next_index_;
  }
}

void OrderedOutput::close(int64_t end) {
  ENGINE_ASSERT(next_index_ == end && pending_.empty(), "OrderedOutput: closing at record ", next_index_, " of ", end, " with ",
                pending_.size(), " waiting");
  writer_->close();
}

}  // namespace deepinfer::pipeline
