#pragma once
// SHA-256 (FIPS 180-4) for the manifest's checksums. Incremental: update() as bytes
// stream past, hex() at the end. None of the project's packages exposes one.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace deepinfer::io {

class Sha256 final {
 public:
  Sha256();
  void update(const void* data, std::size_t size);
  void update(std::string_view text) { update(text.data(), text.size()); }
  std::string hex();  // finishes the digest; the object must not be updated afterwards

 private:
  void compress(const unsigned char* block);
  std::array<uint32_t, 8> state_;
  unsigned char buffer_[64];
  std::size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

std::string sha256_hex(std::string_view data);

}  // namespace deepinfer::io
