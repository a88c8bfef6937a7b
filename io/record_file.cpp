#include "io/record_file.h"

#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace deepinfer::io {
namespace {

// Decompresses one whole frame. Frames written by the zstd command-line tool carry no
// content size, so this streams rather than trusting the header.
bool decompress_frame(const char* src, std::size_t size, std::string* out, std::string* error) {
  constexpr std::size_t kMaxFrameBytes = std::size_t{1} << 32;
  out->clear();
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  if (!dctx) {
    *error = "cannot create a decompression context";
    return false;
  }
  ZSTD_inBuffer in{src, size, 0};
  std::size_t remaining_hint = 1;
  while (in.pos < in.size || remaining_hint != 0) {
    const std::size_t old_size = out->size();
    out->resize(old_size + std::max<std::size_t>(ZSTD_DStreamOutSize(), size * 4));
    ZSTD_outBuffer output{out->data() + old_size, out->size() - old_size, 0};
    remaining_hint = ZSTD_decompressStream(dctx, &output, &in);
    out->resize(old_size + output.pos);
    if (ZSTD_isError(remaining_hint)) {
      *error = ZSTD_getErrorName(remaining_hint);
      ZSTD_freeDCtx(dctx);
      return false;
    }
    if (out->size() > kMaxFrameBytes || (in.pos == in.size && output.pos == 0 && remaining_hint != 0)) {
      *error = out->size() > kMaxFrameBytes ? "frame larger than 4 GiB" : "frame ends early";
      ZSTD_freeDCtx(dctx);
      return false;
    }
  }
  ZSTD_freeDCtx(dctx);
  return true;
}

}  // namespace

RecordWriter::RecordWriter(std::string path, Options options) : RecordWriter(std::move(path), options, true) {}

RecordWriter::RecordWriter(std::string path, Options options, bool truncate)
    : options_(options), file_(std::make_unique<DurableFile>(std::move(path), truncate)) {
  if (options_.records_per_frame == 0) throw std::invalid_argument("RecordWriter: records_per_frame must be > 0");
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  if (!cctx) throw std::runtime_error("zstd: cannot create a compression context");
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, options_.level);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
  cctx_ = cctx;
}

std::unique_ptr<RecordWriter> RecordWriter::resume(std::string path, std::size_t valid_bytes, Options options) {
  const std::string partial = path + ".partial";
  std::error_code error;
  std::filesystem::resize_file(partial, valid_bytes, error);
  if (error) throw std::runtime_error("cannot truncate " + partial + " to " + std::to_string(valid_bytes) + " bytes: " + error.message());
  auto writer = std::unique_ptr<RecordWriter>(new RecordWriter(std::move(path), options, false));
  writer->empty_file_ = valid_bytes == 0;
  return writer;
}

RecordWriter::~RecordWriter() { ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(cctx_)); }

void RecordWriter::append(std::string_view json) {
  if (!file_) throw std::logic_error("RecordWriter: append after close");
  if (json.find('\n') != std::string_view::npos) throw std::invalid_argument("RecordWriter: a record must not contain a newline");
  pending_.append(json);
  pending_ += '\n';
  ++records_;
  if (++pending_records_ >= options_.records_per_frame) write_frame();
}

void RecordWriter::flush() {
  write_frame();
  sync();
}

void RecordWriter::sync() {
  if (file_ && unsynced_) {
    file_->sync();
    unsynced_ = false;
  }
}

void RecordWriter::write_frame() {
  if (!file_ || (pending_.empty() && !(closing_ && empty_file_))) return;
  std::string frame(ZSTD_compressBound(pending_.size()), '\0');
  const std::size_t size = ZSTD_compress2(static_cast<ZSTD_CCtx*>(cctx_), frame.data(), frame.size(), pending_.data(), pending_.size());
  if (ZSTD_isError(size)) throw std::runtime_error(std::string("zstd compression failed: ") + ZSTD_getErrorName(size));
  file_->write(frame.data(), size);
  unsynced_ = true;
  empty_file_ = false;
  pending_.clear();
  pending_records_ = 0;
}

void RecordWriter::close() {
  if (!file_) return;
  closing_ = true;  // a file without records still gets a frame (an empty one)
  flush();
  file_->commit();
  file_.reset();
}

RecordReader::RecordReader(const std::string& path, bool recover) : path_(path), recover_(recover), file_(std::fopen(path.c_str(), "rb")) {
  if (!file_) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
}

RecordReader::~RecordReader() {
  if (file_) std::fclose(file_);
}

// Reads up to `bytes` more of the file into data_ (dropping what earlier frames used); false at its end.
bool RecordReader::read_more(std::size_t bytes) {
  data_.erase(0, data_pos_);
  data_pos_ = 0;
  const std::size_t old_size = data_.size();
  data_.resize(old_size + bytes);
  const std::size_t got = std::fread(data_.data() + old_size, 1, bytes, file_);
  data_.resize(old_size + got);
  if (std::ferror(file_)) throw std::runtime_error("cannot read " + path_ + ": " + std::strerror(errno));
  return got > 0;
}

bool RecordReader::load_frame() {
  // The next whole frame in data_: read on while it is cut off and the file goes on.
  std::size_t compressed = ZSTD_findFrameCompressedSize(data_.data() + data_pos_, data_.size() - data_pos_);
  while (ZSTD_isError(compressed) && read_more(std::max<std::size_t>(std::size_t{1} << 20, data_.size()))) {
    compressed = ZSTD_findFrameCompressedSize(data_.data() + data_pos_, data_.size() - data_pos_);
  }
  if (data_pos_ == data_.size()) return false;  // the end of the file, between frames
  const char* at = data_.data() + data_pos_;
  std::string problem;
  if (ZSTD_isError(compressed)) {
    problem = "incomplete or damaged zstd frame at byte " + std::to_string(offset_) + " (" + ZSTD_getErrorName(compressed) + ")";
  } else {
    if (!decompress_frame(at, compressed, &frame_, &problem)) {
      problem = "corrupt zstd frame at byte " + std::to_string(offset_) + " (" + problem + ")";
    } else if (!frame_.empty() && frame_.back() != '\n') {  // empty: a file without records
      problem = "zstd frame at byte " + std::to_string(offset_) + " does not end with a complete record";
    }
  }
  if (!problem.empty()) {
    if (!recover_) throw std::runtime_error("record file " + path_ + ": " + problem);
    problem_ = problem;
    frame_.clear();
    return false;
  }
  offset_ += compressed;
  data_pos_ += compressed;
  frame_pos_ = 0;
  return true;
}

bool RecordReader::next(std::string* record) {
  while (frame_pos_ >= frame_.size()) {
    if (!problem_.empty() || !load_frame()) return false;
  }
  const std::size_t end = frame_.find('\n', frame_pos_);
  record->assign(frame_, frame_pos_, end - frame_pos_);
  frame_pos_ = end + 1;
  ++records_;
  return true;
}

std::vector<std::string> read_all_records(const std::string& path) {
  RecordReader reader(path, /*recover=*/false);
  std::vector<std::string> records;
  std::string record;
  while (reader.next(&record)) records.push_back(record);
  return records;
}

}  // namespace deepinfer::io
