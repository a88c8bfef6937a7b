#pragma once
// Record files: JSONL compressed with zstd as a sequence of independently decodable
// frames, one per flush, each with a content checksum. Written as PATH.partial and renamed
// when complete. The reader streams frame by frame (bounded memory) and, in recovery mode,
// stops cleanly at the first incomplete or corrupt frame so a resumed job can build on it.
// Owns: framing and compression. Does not own: what a record says.

#include <cstddef>
#include <cstdio>
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

  // One record, without newline. Every records_per_frame records are written out as a frame
  // (into the page cache: they survive a kill of the process, not a power cut).
  void append(std::string_view json);
  void flush();                                                     // writes pending records as one frame and fsyncs everything written
  void sync();                                                      // fsyncs the frames written so far (pending records stay pending)
  std::size_t pending_records() const { return pending_records_; }  // appended, not yet in a frame
  void close();                                                     // flush, then rename PATH.partial to PATH
  std::size_t records_written() const { return records_; }

 private:
  RecordWriter(std::string path, Options options, bool truncate);
  void write_frame();
  Options options_;
  std::unique_ptr<DurableFile> file_;
  std::string pending_;
  std::size_t pending_records_ = 0;
  std::size_t records_ = 0;
  bool unsynced_ = false;  // frames written since the last fsync
  bool empty_file_ = true;
  bool closing_ = false;  // no frame in the file yet: close() writes an empty one, so `zstd -dc` reads it
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
  bool read_more(std::size_t bytes);
  std::string path_;
  bool recover_;
  std::FILE* file_ = nullptr;
  std::string data_;          // compressed bytes read and not yet decoded: about one frame
  std::size_t data_pos_ = 0;  // where the next frame starts in data_
  std::size_t offset_ = 0;    // where it starts in the file
  std::string frame_;
  std::size_t frame_pos_ = 0;
  std::string problem_;
  std::size_t records_ = 0;
};

// Every record of a file (strict). For tests and small files.
std::vector<std::string> read_all_records(const std::string& path);

}  // namespace deepinfer::io
