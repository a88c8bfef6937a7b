// libFuzzer target: one JSONL request line. Any bytes must give a request or an error
// record, never a crash; a request must satisfy the documented ranges. Inputs of odd length
// are parsed with the tiny tokenizer (text prompts and stop strings allowed), the others without.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <variant>

#include "io/request_reader.h"
#include "io/tiny_tokenizer.h"
#include "io/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deepinfer::io;
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  static const auto tokenizer = Tokenizer::from_json(tiny_tokenizer_json(512), "tiny");
  const RequestItem item = parse_request_line(line, InputLocation{"fuzz.jsonl", 1},
                                              RequestParseOptions{.vocab_size = 4096, .tokenizer = size % 2 ? tokenizer : nullptr});
  if (const auto* request = std::get_if<RequestLine>(&item)) {
    if (request->prompt_token_ids.empty() || request->id.empty()) std::abort();
    for (int32_t id : request->prompt_token_ids)
      if (id < 0 || id >= 4096) std::abort();
    if (request->max_tokens < 1 || request->min_tokens > request->max_tokens) std::abort();
    if (!(request->top_p > 0 && request->top_p <= 1) || request->temperature < 0) std::abort();
    if (size % 2 == 0 && (request->prompt_text || !request->stop.empty())) std::abort();  // need the tokenizer
    for (const auto& stop : request->stop)
      if (stop.empty()) std::abort();
  } else if (std::get<RequestError>(item).message.empty()) {
    std::abort();
  }
  return 0;
}
