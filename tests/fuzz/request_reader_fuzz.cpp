// libFuzzer target: the streaming line reader over a whole input file (line splitting, blank
// lines, overlong lines, duplicate ids kept on disk). Any bytes give one item per non-blank
// line in line order and a byte count that matches the file; never a crash.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <variant>

#include "io/request_reader.h"

namespace {

const std::string& input_path() {
  static const std::string path = "/tmp/deepinfer-reader-fuzz-" + std::to_string(::getpid()) + ".jsonl";
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deepinfer::io;
  std::FILE* file = std::fopen(input_path().c_str(), "wb");
  if (!file) std::abort();
  std::fwrite(data, 1, size, file);
  std::fclose(file);
  {
    // Small limits so that overlong lines, and a saturated filter that searches the spill files, are reached.
    RequestReader reader({input_path()}, {.parse = {.vocab_size = 512}, .max_line_bytes = 64, .ids = {.bloom_bytes = 8}});
    RequestItem item;
    int64_t last_line = 0, items = 0;
    while (reader.next(&item)) {
      const InputLocation& where = std::visit([](const auto& x) -> const InputLocation& { return x.input; }, item);
      if (where.line <= last_line || where.file != input_path()) std::abort();
      last_line = where.line;
      ++items;
    }
    if (reader.bytes_read() != static_cast<int64_t>(size) || reader.total_bytes() != static_cast<int64_t>(size)) std::abort();
    if (items > reader.lines_read()) std::abort();
  }
  std::remove(input_path().c_str());  // libFuzzer leaves by _Exit: nothing at exit would remove it
  return 0;
}
