#include "pipeline/ordered_output.h"

#include <charconv>
#include <cstdio>

#include "engine/check.h"

namespace deepinfer::pipeline {
namespace {

// The waiting file is flushed only by flush() (the job's timer), never by record count.
constexpr io::RecordWriter::Options kWaitingOptions{.level = 3, .records_per_frame = std::size_t{1} << 40};

}  // namespace

OrderedOutput::OrderedOutput(std::unique_ptr<io::RecordWriter> writer, int64_t first_index, std::string waiting_path)
    : writer_(std::move(writer)),
      next_index_(first_index),
      waiting_path_(std::move(waiting_path)),
      waiting_(std::make_unique<io::RecordWriter>(waiting_path_, kWaitingOptions)) {}

void OrderedOutput::add(int64_t index, std::string json) {
  ENGINE_ASSERT(index >= next_index_ && !pending_.count(index), "OrderedOutput: record ", index, " added twice");
  if (index != next_index_) {
    waiting_->append(waiting_line(index, json));
    ++waiting_written_;
  }
  pending_.emplace(index, std::move(json));
  for (auto it = pending_.begin(); it != pending_.end() && it->first == next_index_; it = pending_.erase(it)) {
    writer_->append(it->second);
    ++next_index_;
  }
}

void OrderedOutput::flush() {
  writer_->flush();
  if (pending_.empty() && waiting_written_ > 0) {
    waiting_ = io::RecordWriter::resume(waiting_path_, 0, kWaitingOptions);  // every waiting record is in the results file now
    waiting_written_ = 0;
  } else {
    waiting_->flush();
  }
}

void OrderedOutput::close(int64_t end) {
  ENGINE_ASSERT(next_index_ == end && pending_.empty(), "OrderedOutput: closing at record ", next_index_, " of ", end, " with ",
                pending_.size(), " waiting");
  writer_->close();
  waiting_.reset();
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
