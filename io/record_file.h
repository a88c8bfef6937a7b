#pragma once
// Record files: JSONL compressed with zstd as a sequence of independently decodable
// frames, one per flush, each with a content checksum. Written as PATH.partial and renamed
// when complete. The reader streams frame by frame (bounded memory) and, in recovery mode,
// stops cleanly at the first incomplete or corrupt frame so a resumed job can build on it.
// Owns: framing and compression. Does not own: what a record says.

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/durable_file.h"

namespace deepinfer::io {

class RecordWriter final {
 public:
  struct Options {
    int level = 3;                       // zstd level; fixed, so equal records give equal bytes
    std::size_t records_per_frame = 64;  // flush() is also called explicitly at checkpoints
  };
  // Starts PATH.partial afresh.
  RecordWriter(std::string path, Options options);
  // Continues PATH.partial after its first valid_bytes (the prefix read_record_prefix recovered).
  static std::unique_ptr<RecordWriter> resume(std::string path, std::size_t valid_bytes, Options options);
  ~RecordWriter();

  void append(std::string_view json);  // one record, without newline
  void flush();                        // writes pending records as one frame and fsyncs
  void close();                        // flush, then rename PATH.partial to PATH
  std::size_t records_written() const { return records_; }

 private:
  RecordWriter(std::string path, Options options, bool truncate);
  Options options_;
  std::unique_ptr<DurableFile> file_;
  std::string pending_;
  std::size_t pending_records_ = 0;
  std::size_t records_ = 0;
  void* cctx_ = nullptr;
};

// Streams the records of a file. In strict mode any damage throws (naming file and byte
// offset); in recovery mode reading stops at the first damaged frame and truncated() says so.
class RecordReader final {
 public:
  RecordReader(const std::string& path, bool recover);
  ~RecordReader();
  RecordReader(const RecordReader&) = delete;
  RecordReader& operator=(const RecordReader&) = delete;

  bool next(std::string* record);                      // false at the end (or at damage, in recovery mode)
  std::size_t valid_bytes() const { return offset_; }  // bytes of complete frames read so far
  bool truncated() const { return !problem_.empty(); }
  const std::string& problem() const { return problem_; }  // why reading stopped early
  std::size_t records_read() const { return records_; }

 private:
  bool load_frame();
  std::string path_;
  bool recover_;
  std::string data_;  // the whole compressed file (frames are decoded one at a time)
  std::size_t offset_ = 0;
  std::string frame_;
  std::size_t frame_pos_ = 0;
  std::string problem_;
  std::size_t records_ = 0;
};

// Every record of a file (strict). For tests and small files.
std::vector<std::string> read_all_records(const std::string& path);

}  // namespace deepinfer::io
