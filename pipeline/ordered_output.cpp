#include "pipeline/ordered_output.h"

#include <charconv>
#include <cstdio>
#include <utility>

#include "engine/check.h"

namespace deepinfer::pipeline {

OrderedOutput::OrderedOutput(std::unique_ptr<io::RecordWriter> writer, int64_t first_index, std::string waiting_path)
    : writer_(std::move(writer)), next_index_(first_index), waiting_path_(std::move(waiting_path)) {}

void OrderedOutput::add(int64_t index, std::string json) {
  ENGINE_ASSERT(index >= next_index_ && !pending_.count(index), "OrderedOutput: record ", index, " added twice");
  pending_.emplace(index, std::move(json));
  for (auto it = pending_.begin(); it != pending_.end() && it->first == next_index_; it = pending_.erase(it)) {
    writer_->append(it->second);
    unframed_.emplace_back(next_index_++, std::move(it->second));
    if (writer_->pending_records() == 0) unframed_.clear();  // the writer wrote them out as a frame
  }
}

void OrderedOutput::flush() {
  writer_->sync();
  io::RecordWriter waiting(waiting_path_,
                           io::RecordWriter::Options{.level = 3, .records_per_frame = unframed_.size() + pending_.size() + 1});
  for (const auto& [index, json] : unframed_) waiting.append(waiting_line(index, json));
  for (const auto& [index, json] : pending_) waiting.append(waiting_line(index, json));
  waiting.close();  // fsynced, then renamed over the previous one: always one complete file
}

void OrderedOutput::close(int64_t end) {
  ENGINE_ASSERT(next_index_ == end && pending_.empty(), "OrderedOutput: closing at record ", next_index_, " of ", end, " with ",
                pending_.size(), " waiting");
  writer_->close();
  std::remove(waiting_path_.c_str());
  std::remove((waiting_path_ + ".partial").c_str());
}

std::string waiting_line(int64_t index, const std::string& json) { return std::to_string(index) + " " + json; }

bool parse_waiting_line(const std::string& line, int64_t* index, std::string* json) {
  const char* end = line.data() + line.size();
  const auto [after, error] = std::from_chars(line.data(), end, *index);
  if (error != std::errc() || after == end || *after != ' ' || *index < 0) return false;
  json->assign(after + 1, end);
  return true;
}

}  // namespace deepinfer::pipeline
