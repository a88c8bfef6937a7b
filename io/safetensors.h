#pragma once
// Safetensors checkpoints: a memory-mapped reader for one file or a sharded folder
// (model.safetensors.index.json), and a writer for random checkpoints.
// Owns: parsing and validating the header (dtype, shape, offsets) so that a corrupt or
// truncated file is a clear error naming the file and tensor, never a crash.
// Does not own: turning bytes into torch tensors or dequantizing (model/ does that).

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::io {

enum class DType { kF32, kF16, kBF16, kF8E4M3, kF8E8M0, kI8, kU8, kI32, kI64 };

std::string_view dtype_name(DType dtype);  // "F32", "BF16", "F8_E4M3", ...
std::size_t dtype_size(DType dtype);       // bytes per element
std::optional<DType> parse_dtype(std::string_view name);

// A tensor's bytes inside a mapped file. Valid while the owning file/checkpoint lives.
struct TensorView {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;
  std::size_t nbytes = 0;
  int64_t numel() const;
};

// One .safetensors file, mapped read-only. Throws std::runtime_error naming the file
// (and tensor) on any malformed header, bad dtype, overlapping or out-of-range offsets.
class SafetensorsFile final {
 public:
  static std::shared_ptr<const SafetensorsFile> open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<TensorView>& tensors() const { return tensors_; }
  const TensorView* find(std::string_view name) const;  // nullptr if absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // Parses a header (the JSON after the 8-byte length) against a data section of
  // data_size bytes. Exposed for tests and the fuzz target.
  static std::vector<TensorView> parse_header(std::string_view json, const std::byte* data, std::size_t data_size, const std::string& path,
                                              std::map<std::string, std::string>* metadata);

 private:
  SafetensorsFile() = default;
  std::string path_;
  void* map_ = nullptr;
  std::size_t map_size_ = 0;
  std::vector<TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A checkpoint folder: every *.safetensors in it, or the shards named by
// model.safetensors.index.json. Names are unique across shards.
class Checkpoint final {
 public:
  static Checkpoint open(const std::string& dir);
  const TensorView* find(std::string_view name) const;  // nullptr if absent
  std::vector<std::string> names() const;               // sorted
  const std::string& dir() const { return dir_; }
  // The file a tensor lives in (for error messages).
  const std::string& file_of(std::string_view name) const;

 private:
  std::string dir_;
  std::vector<std::shared_ptr<const SafetensorsFile>> files_;
  std::map<std::string, std::pair<const TensorView*, std::size_t>, std::less<>> index_;  // name -> (view, file)
};

// Writes one .safetensors file (tensors sorted by name, 8-byte aligned header).
// Written to PATH.partial, fsynced and renamed.
class SafetensorsWriter final {
 public:
  void add(std::string name, DType dtype, std::vector<int64_t> shape, const void* data, std::size_t nbytes);
  void write(const std::string& path) const;
  std::size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<std::byte> bytes;
  };
  std::map<std::string, Entry> entries_;
};

}  // namespace deepinfer::io
