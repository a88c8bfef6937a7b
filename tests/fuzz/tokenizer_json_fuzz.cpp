// libFuzzer target: tokenizer.json text. Any bytes give a tokenizer or std::invalid_argument;
// a tokenizer that loads encodes and decodes a fixed text without crashing, and its ids decode.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "io/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deepinfer::io;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto tokenizer = Tokenizer::from_json(text, "fuzz/tokenizer.json");
    const auto ids = tokenizer->encode("Hello, wörld 42!\n\t<|x|>", /*add_special_tokens=*/true);
    tokenizer->decode(ids, /*skip_special_tokens=*/true);
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
