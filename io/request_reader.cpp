#include "io/request_reader.h"

#include <algorithm>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace deepinfer::io {

void check_input_files(const std::vector<std::string>& files) {
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string& path = files[i];
    std::error_code error;
    const auto status = std::filesystem::status(path, error);
    if (std::filesystem::is_directory(status)) throw std::invalid_argument("input " + path + " is a directory, not a JSONL file");
    // Checked before opening: opening a FIFO would wait for a writer. The job reads its inputs
    // twice (their checksums for job.json, then the requests), which a pipe cannot give.
    if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
      throw std::invalid_argument(
          "input " + path + " is not a regular file (a pipe, FIFO or device): the job reads its inputs twice; write it to a file first");
    for (std::size_t j = 0; j < i; ++j) {
      if (std::filesystem::exists(status) && std::filesystem::equivalent(files[j], path, error))
        throw std::invalid_argument("input " + path + " is named twice (also as " + files[j] + "): every request would be a duplicate");
    }
    std::FILE* file = std::fopen(path.c_str(), "rb");
    if (!file) throw std::invalid_argument("cannot open input " + path + ": " + std::strerror(errno));
    std::fclose(file);
  }
}

RequestReader::RequestReader(std::vector<std::string> files, Options options)
    : files_(std::move(files)), options_(options), buffer_(1 << 20), seen_ids_(options_.ids) {
  if (files_.empty()) throw std::invalid_argument("RequestReader: no input files");
  check_input_files(files_);
  for (const std::string& path : files_) {
    std::error_code error;  // a missing file is reported when it is opened
    const bool regular = std::filesystem::is_regular_file(path, error);
    const auto size = regular ? std::filesystem::file_size(path, error) : 0;
    if (!regular || error) {
      total_bytes_ = -1;
      break;
    }
    total_bytes_ += static_cast<int64_t>(size);
  }
}

RequestReader::~RequestReader() {
  if (file_) std::fclose(file_);
}

bool RequestReader::open_next_file() {
  if (file_) {
    std::fclose(file_);
    file_ = nullptr;
  }
  if (file_index_ >= files_.size()) return false;
  const std::string& path = files_[file_index_];
  file_ = std::fopen(path.c_str(), "rb");
  if (!file_) throw std::runtime_error("cannot open input " + path + ": " + std::strerror(errno));
  line_number_ = 0;
  buffer_pos_ = buffer_end_ = 0;
  return true;
}

bool RequestReader::fill_buffer() {
  buffer_pos_ = 0;
  buffer_end_ = std::fread(buffer_.data(), 1, buffer_.size(), file_);
  if (std::ferror(file_)) throw std::runtime_error("cannot read input " + files_[file_index_] + ": " + std::strerror(errno));
  return buffer_end_ > 0;
}

// Reads up to the next '\n' (excluded). Keeps at most max_line_bytes; beyond that the rest
// of the line is skipped and *too_long is set. False at the end of the file.
bool RequestReader::read_line(std::string* line, bool* too_long) {
  line->clear();
  *too_long = false;
  bool any = false;
  for (;;) {
    if (buffer_pos_ == buffer_end_ && !fill_buffer()) return any;
    any = true;
    const char* begin = buffer_.data() + buffer_pos_;
    const std::size_t available = buffer_end_ - buffer_pos_;
    const void* newline = std::memchr(begin, '\n', available);
    const std::size_t take = newline ? static_cast<const char*>(newline) - begin : available;
    if (!*too_long) {
      if (line->size() + take > options_.max_line_bytes) {
        *too_long = true;
        line->clear();
        line->shrink_to_fit();
      } else {
        line->append(begin, take);
      }
    }
    buffer_pos_ += take;
    bytes_read_ += static_cast<int64_t>(take);
    if (newline) {
      ++buffer_pos_;
      ++bytes_read_;
      return true;
    }
  }
}

// Whether `id` has the form FILE:LINE of one of the job's inputs (FILE as given).
bool RequestReader::is_location_form(const std::string& id) const {
  const auto colon = id.rfind(':');
  if (colon == std::string::npos || colon + 1 == id.size()) return false;
  if (!std::all_of(id.begin() + static_cast<std::ptrdiff_t>(colon) + 1, id.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  return std::find(files_.begin(), files_.end(), id.substr(0, colon)) != files_.end();
}

// Every record's id is unique in the job. A line's own location (FILE:LINE) is its default id,
// and the id of an error record without a readable id; so another line may not take that form
// as its id, and an id seen before, on a good line or a bad one, is a duplicate. Such a line
// becomes an error record under its own location.
void RequestReader::keep_ids_unique(RequestItem* item, const InputLocation& where) {
  const std::string own = location_id(where);
  auto* error = std::get_if<RequestError>(item);
  const std::string id = error ? error->id : std::get<RequestLine>(*item).id;
  const std::string reason = error ? error->message.substr(own.size() + 2) : "";  // the parse error without "FILE:LINE: "
  const auto replace = [&](const std::string& why) {
    *item = RequestError{own, where, own + ": " + why + (reason.empty() ? "" : "; and: " + reason)};
  };
  if (id == own) return;
  if (is_location_form(id)) {
    replace("id '" + id + "' has the form FILE:LINE of an input line, which the job keeps for lines without an id");
    return;
  }
  const auto first = seen_ids_.insert(id, {static_cast<uint32_t>(file_index_), line_number_});
  if (first) replace("duplicate id '" + id + "' (first at " + files_[first->file] + ":" + std::to_string(first->line) + ")");
}

bool RequestReader::next(RequestItem* item) {
  std::string line;
  for (;;) {
    if (!file_ && !open_next_file()) return false;
    bool too_long = false;
    if (!read_line(&line, &too_long)) {
      ++file_index_;
      std::fclose(file_);
      file_ = nullptr;
      continue;
    }
    ++line_number_;
    ++lines_read_;
    const InputLocation where{files_[file_index_], line_number_};
    if (too_long) {
      *item = RequestError{location_id(where), where,
                           location_id(where) + ": line longer than " + std::to_string(options_.max_line_bytes) + " bytes"};
      return true;
    }
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank line
    *item = parse_request_line(line, where, options_.parse);
    keep_ids_unique(item, where);
    return true;
  }
}

}  // namespace deepinfer::io
