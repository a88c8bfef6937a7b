#pragma once
// Streams JSONL request files, one line at a time (bounded memory: a line is parsed and
// handed out before the next is read, and the ids seen live on disk, seen_ids.h). Every non-blank line yields either a RequestLine or
// a RequestError; the job goes on after an error. See docs/input-format.md for the
// accepted forms and what each kind of bad input becomes.

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "io/request.h"
#include "io/seen_ids.h"

namespace deepinfer::io {

class Tokenizer;

using RequestItem = std::variant<RequestLine, RequestError>;

struct RequestParseOptions {
  int64_t vocab_size = 0;              // token ids must be < vocab_size (0: unchecked)
  int64_t max_tokens_limit = 1 << 20;  // largest max_tokens accepted
  // Tokenizes text prompts and allows stop strings; null: both are error records.
  std::shared_ptr<const Tokenizer> tokenizer = nullptr;
  // The checkpoint config's bos_token_id: with add_special_tokens it is prepended to a text
  // prompt when the tokenizer's template adds no token itself (as transformers' tokenizers
  // with add_bos_token do); -1: never.
  int32_t bos_token_id = -1;
};

// "FILE:LINE" of an input line: the id of the error record a bad line becomes.
std::string location_id(const InputLocation& where);

// Parses one line (without its newline). Never throws on bad input: returns an error.
// A text prompt comes back tokenized (prompt_token_ids) when options.tokenizer is set.
// Thread-safe (one simdjson parser per thread).
RequestItem parse_request_line(std::string_view line, const InputLocation& where, const RequestParseOptions& options);

// Throws std::invalid_argument naming the first path that is a directory, not a regular file
// (a pipe, FIFO or device), the same file as an earlier one, or cannot be opened for reading,
// so a job can refuse its inputs before it creates anything.
void check_input_files(const std::vector<std::string>& files);

class RequestReader final {
 public:
  struct Options {
    RequestParseOptions parse;
    std::size_t max_line_bytes = 64u << 20;  // longer lines become an error record
    SeenIds::Options ids;                    // duplicate-id detection (bounded memory; seen_ids.h)
  };
  RequestReader(std::vector<std::string> files, Options options);
  ~RequestReader();
  RequestReader(const RequestReader&) = delete;
  RequestReader& operator=(const RequestReader&) = delete;

  // The next request or error, in file order then line order; false at the end.
  // Throws std::runtime_error only when a file cannot be opened or read.
  bool next(RequestItem* item);
  int64_t lines_read() const { return lines_read_; }
  // Progress through the input without a second pass: the bytes of the lines read so far
  // (newlines and blank lines included), and the inputs' total size as it was at
  // construction, or -1 when a file's size is unknown (not a regular file).
  int64_t bytes_read() const { return bytes_read_; }
  int64_t total_bytes() const { return total_bytes_; }

 private:
  bool read_line(std::string* line, bool* too_long);
  bool fill_buffer();
  bool open_next_file();
  bool is_location_form(const std::string& id) const;
  void keep_ids_unique(RequestItem* item, const InputLocation& where);
  std::vector<std::string> files_;
  Options options_;
  std::size_t file_index_ = 0;
  std::FILE* file_ = nullptr;
  std::vector<char> buffer_;
  std::size_t buffer_pos_ = 0;
  std::size_t buffer_end_ = 0;
  int64_t line_number_ = 0;
  int64_t lines_read_ = 0;
  int64_t bytes_read_ = 0;
  int64_t total_bytes_ = 0;
  SeenIds seen_ids_;  // duplicate detection
};

}  // namespace deepinfer::io
