#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <stdexcept>

#include <simdjson.h>

#include "io/durable_file.h"
#include "io/json_writer.h"

namespace deepinfer::io {
namespace {

constexpr std::size_t kMaxHeaderBytes = 100u << 20;  // real checkpoints use a few MiB

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  std::size_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::kF32, "F32", 4},        {DType::kF16, "F16", 2},        {DType::kBF16, "BF16", 2},
    {DType::kF8E4M3, "F8_E4M3", 1}, {DType::kF8E8M0, "F8_E8M0", 1}, {DType::kI8, "I8", 1},
    {DType::kU8, "U8", 1},          {DType::kI32, "I32", 4},        {DType::kI64, "I64", 8},
};

[[noreturn]] void fail(const std::string& path, const std::string& what) { throw std::runtime_error("safetensors " + path + ": " + what); }

}  // namespace

std::string_view dtype_name(DType dtype) {
  for (const auto& info : kDTypes)
    if (info.dtype == dtype) return info.name;
  throw std::logic_error("unknown DType");
}

std::size_t dtype_size(DType dtype) {
  for (const auto& info : kDTypes)
    if (info.dtype == dtype) return info.size;
  throw std::logic_error("unknown DType");
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& info : kDTypes)
    if (info.name == name) return info.dtype;
  return std::nullopt;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<TensorView> SafetensorsFile::parse_header(std::string_view json, const std::byte* data, std::size_t data_size,
                                                      const std::string& path, std::map<std::string, std::string>* metadata) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(json);
  simdjson::dom::element root;
  if (auto error = parser.parse(padded).get(root)) fail(path, std::string("header is not valid JSON: ") + simdjson::error_message(error));
  simdjson::dom::object object;
  if (root.get(object)) fail(path, "header is not a JSON object");

  std::vector<TensorView> tensors;
  for (auto field : object) {
    std::string name(field.key);
    if (name == "__metadata__") {
      simdjson::dom::object meta;
      if (field.value.get(meta)) fail(path, "__metadata__ is not an object");
      for (auto entry : meta) {
        std::string_view value;
        if (entry.value.get(value)) fail(path, "__metadata__." + std::string(entry.key) + " is not a string");
        if (metadata) (*metadata)[std::string(entry.key)] = std::string(value);
      }
      continue;
    }
    simdjson::dom::object desc;
    if (field.value.get(desc)) fail(path, "tensor '" + name + "': entry is not an object");
    std::string_view dtype_text;
    if (desc["dtype"].get(dtype_text)) fail(path, "tensor '" + name + "': missing or non-string dtype");
    auto dtype = parse_dtype(dtype_text);
    if (!dtype) fail(path, "tensor '" + name + "': unsupported dtype '" + std::string(dtype_text) + "'");
    simdjson::dom::array shape_json, offsets_json;
    if (desc["shape"].get(shape_json)) fail(path, "tensor '" + name + "': missing or non-array shape");
    if (desc["data_offsets"].get(offsets_json)) fail(path, "tensor '" + name + "': missing or non-array data_offsets");

    TensorView view;
    view.name = name;
    view.dtype = *dtype;
    uint64_t numel = 1;
    for (auto dim : shape_json) {
      int64_t value;
      if (dim.get(value) || value < 0) fail(path, "tensor '" + name + "': shape entries must be non-negative integers");
      if (value > 0 && numel > std::numeric_limits<uint64_t>::max() / 8 / static_cast<uint64_t>(value))
        fail(path, "tensor '" + name + "': shape overflows");
      numel *= static_cast<uint64_t>(value);
      view.shape.push_back(value);
    }
    std::vector<uint64_t> offsets;
    for (auto offset : offsets_json) {
      uint64_t value;
      if (offset.get(value)) fail(path, "tensor '" + name + "': data_offsets must be non-negative integers");
      offsets.push_back(value);
    }
    if (offsets.size() != 2 || offsets[0] > offsets[1])
      fail(path, "tensor '" + name + "': data_offsets must be [begin, end] with begin <= end");
    const uint64_t expected = numel * dtype_size(*dtype);
    if (offsets[1] - offsets[0] != expected)
      fail(path, "tensor '" + name + "': " + std::to_string(offsets[1] - offsets[0]) + " bytes for shape of " + std::to_string(expected) +
                     " bytes (" + std::string(dtype_text) + ")");
    if (offsets[1] > data_size)
      fail(path, "tensor '" + name + "': data ends at " + std::to_string(offsets[1]) + " past the file's data section of " +
                     std::to_string(data_size) + " bytes (truncated file?)");
    view.data = data + offsets[0];
    view.nbytes = expected;
    tensors.push_back(std::move(view));
  }

  std::sort(tensors.begin(), tensors.end(),
            [](const TensorView& a, const TensorView& b) { return a.data < b.data || (a.data == b.data && a.nbytes < b.nbytes); });
  for (std::size_t i = 1; i < tensors.size(); ++i) {
    if (tensors[i - 1].data + tensors[i - 1].nbytes > tensors[i].data)
      fail(path, "tensors '" + tensors[i - 1].name + "' and '" + tensors[i].name + "' overlap");
  }
  std::sort(tensors.begin(), tensors.end(), [](const TensorView& a, const TensorView& b) { return a.name < b.name; });
  for (std::size_t i = 1; i < tensors.size(); ++i)
    if (tensors[i - 1].name == tensors[i].name) fail(path, "tensor '" + tensors[i].name + "' appears twice");
  return tensors;
}

std::shared_ptr<const SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  std::shared_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    fail(path, std::string("cannot stat: ") + std::strerror(errno));
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    fail(path, "file of " + std::to_string(size) + " bytes is too short for a header");
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) fail(path, std::string("cannot mmap: ") + std::strerror(errno));
  file->map_ = map;
  file->map_size_ = size;

  const auto* bytes = static_cast<const std::byte*>(map);
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | std::to_integer<uint64_t>(bytes[i]);
  if (header_size > kMaxHeaderBytes || header_size > size - 8)
    fail(path, "header length " + std::to_string(header_size) + " exceeds the file (" + std::to_string(size) +
                   " bytes): truncated or not a safetensors file");
  std::string_view json(reinterpret_cast<const char*>(bytes + 8), header_size);
  const std::byte* data = bytes + 8 + header_size;
  file->tensors_ = parse_header(json, data, size - 8 - header_size, path, &file->metadata_);
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, map_size_);
}

const TensorView* SafetensorsFile::find(std::string_view name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const TensorView& view, std::string_view key) { return view.name < key; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

Checkpoint Checkpoint::open(const std::string& dir) {
  namespace fs = std::filesystem;
  Checkpoint checkpoint;
  checkpoint.dir_ = dir;
  if (!fs::is_directory(dir)) throw std::runtime_error("checkpoint " + dir + ": not a directory");
  std::vector<std::string> shards;
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(index_path)) {
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    if (auto error = parser.load(index_path.string()).get(root))
      throw std::runtime_error("checkpoint index " + index_path.string() + ": " + simdjson::error_message(error));
    simdjson::dom::object weight_map;
    if (root["weight_map"].get(weight_map))
      throw std::runtime_error("checkpoint index " + index_path.string() + ": missing object 'weight_map'");
    for (auto entry : weight_map) {
      std::string_view shard;
      if (entry.value.get(shard))
        throw std::runtime_error("checkpoint index " + index_path.string() + ": weight_map['" + std::string(entry.key) +
                                 "'] is not a string");
      if (shard.find('/') != std::string_view::npos || shard.empty())
        throw std::runtime_error("checkpoint index " + index_path.string() + ": shard name '" + std::string(shard) +
                                 "' is not a file name");
      shards.emplace_back(shard);
    }
  } else {
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.path().extension() == ".safetensors") shards.push_back(entry.path().filename().string());
  }
  std::sort(shards.begin(), shards.end());
  shards.erase(std::unique(shards.begin(), shards.end()), shards.end());
  if (shards.empty()) throw std::runtime_error("checkpoint " + dir + ": no .safetensors files");
  for (const auto& shard : shards) {
    auto file = SafetensorsFile::open((fs::path(dir) / shard).string());
    const std::size_t file_index = checkpoint.files_.size();
    for (const auto& view : file->tensors()) {
      auto [it, inserted] = checkpoint.index_.emplace(view.name, std::make_pair(&view, file_index));
      if (!inserted)
        throw std::runtime_error("checkpoint " + dir + ": tensor '" + view.name + "' is in both " +
                                 checkpoint.files_[it->second.second]->path() + " and " + file->path());
    }
    checkpoint.files_.push_back(std::move(file));
  }
  return checkpoint;
}

const TensorView* Checkpoint::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second.first;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(index_.size());
  for (const auto& [name, _] : index_) out.push_back(name);
  return out;
}

const std::string& Checkpoint::file_of(std::string_view name) const {
  auto it = index_.find(name);
  if (it == index_.end()) throw std::invalid_argument("checkpoint " + dir_ + ": no tensor '" + std::string(name) + "'");
  return files_[it->second.second]->path();
}

void SafetensorsWriter::add(std::string name, DType dtype, std::vector<int64_t> shape, const void* data, std::size_t nbytes) {
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0) throw std::invalid_argument("safetensors writer: tensor '" + name + "' has a negative dimension");
    numel *= d;
  }
  if (static_cast<std::size_t>(numel) * dtype_size(dtype) != nbytes)
    throw std::invalid_argument("safetensors writer: tensor '" + name + "' has " + std::to_string(nbytes) + " bytes for " +
                                std::to_string(numel) + " elements of " + std::string(dtype_name(dtype)));
  if (name == "__metadata__" || entries_.count(name))
    throw std::invalid_argument("safetensors writer: duplicate or reserved tensor name '" + name + "'");
  Entry entry{dtype, std::move(shape), std::vector<std::byte>(nbytes)};
  if (nbytes) std::memcpy(entry.bytes.data(), data, nbytes);
  entries_.emplace(std::move(name), std::move(entry));
}

void SafetensorsWriter::write(const std::string& path) const {
  std::string header = "{";
  uint64_t offset = 0;
  bool first = true;
  for (const auto& [name, entry] : entries_) {
    header += first ? "" : ",";
    first = false;
    header += json_escape(name) + ":{\"dtype\":\"" + std::string(dtype_name(entry.dtype)) + "\",\"shape\":[";
    for (std::size_t i = 0; i < entry.shape.size(); ++i) header += (i ? "," : "") + std::to_string(entry.shape[i]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + entry.bytes.size()) + "]}";
    offset += entry.bytes.size();
  }
  header += "}";
  while ((header.size() + 8) % 8 != 0) header += ' ';

  DurableFile out(path);
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>((header.size() >> (8 * i)) & 0xFF);
  out.write(length, 8);
  out.write(header.data(), header.size());
  for (const auto& [_, entry] : entries_) out.write(entry.bytes.data(), entry.bytes.size());
  out.commit();
}

}  // namespace deepinfer::io
