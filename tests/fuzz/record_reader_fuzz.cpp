// libFuzzer target: the partial results file that --resume reads (RecordReader in recovery
// mode). Any bytes give the records of a valid prefix and stop at the first damaged frame;
// the valid prefix reads back the same in strict mode; never a crash.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/record_file.h"

namespace {

void write_file(const std::string& path, const uint8_t* data, size_t size) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (!file) std::abort();
  std::fwrite(data, 1, size, file);
  std::fclose(file);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deepinfer::io;
  static const std::string path = "/tmp/deepinfer-record-fuzz-" + std::to_string(::getpid()) + ".zst";
  write_file(path, data, size);
  std::vector<std::string> recovered;
  std::size_t valid = 0;
  {
    RecordReader reader(path, /*recover=*/true);
    std::string record;
    while (reader.next(&record)) {
      if (record.find('\n') != std::string::npos) std::abort();
      recovered.push_back(record);
    }
    valid = reader.valid_bytes();
    if (valid > size || (valid < size && !reader.truncated())) std::abort();
  }
  // The prefix --resume keeps (it truncates the file to valid_bytes) is a clean record file.
  write_file(path, data, valid);
  try {
    if (read_all_records(path) != recovered) std::abort();
  } catch (const std::runtime_error&) {
    std::abort();
  }
  std::remove(path.c_str());  // libFuzzer leaves by _Exit: nothing at exit would remove it
  return 0;
}
