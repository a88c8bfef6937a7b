// libFuzzer target: a safetensors header against a data section. Any bytes must give
// tensors that lie inside the data section, or a std::runtime_error; never a crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deepinfer::io;
  // First two bytes choose how much of the input is header; the rest is the data section.
  if (size < 2) return 0;
  const size_t header_size = std::min<size_t>(size - 2, (size_t(data[0]) << 8) | data[1]);
  const std::string_view header(reinterpret_cast<const char*>(data + 2), header_size);
  const std::vector<std::byte> section(reinterpret_cast<const std::byte*>(data + 2 + header_size),
                                       reinterpret_cast<const std::byte*>(data + size));
  try {
    const auto tensors = SafetensorsFile::parse_header(header, section.data(), section.size(), "fuzz", nullptr);
    for (const auto& t : tensors) {
      if (t.data < section.data() || t.data + t.nbytes > section.data() + section.size()) std::abort();
      if (static_cast<size_t>(t.numel()) * dtype_size(t.dtype) != t.nbytes) std::abort();
    }
  } catch (const std::runtime_error&) {
  }
  return 0;
}
