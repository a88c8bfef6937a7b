// libFuzzer target: config.json text. Any bytes give a ModelConfig or std::invalid_argument
// naming the key; never a crash or another exception.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "model/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    deepinfer::model::parse_model_config(text, "fuzz/config.json");
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
