#pragma once
// What one JSONL input line becomes: a request with its sampling fields as the user wrote
// them (defaults filled in), or an error record naming file, line and reason.
// Owns: the wire-level fields and their defaults. Does not own: scheduling or sampling
// semantics (engine/ validates its own SamplingParams again), tokenization (io/tokenizer.h:
// the reader calls it for text prompts when it has a tokenizer).

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace deepinfer::io {

struct InputLocation {
  std::string file;  // as given on the command line
  int64_t line = 0;  // 1-based
};

// Which form a request line had: the native one, an OpenAI batch line for /v1/completions, or
// one for /v1/chat/completions (without or with thinking). Results keep it ("api"), so that
// `cat --format openai` answers each line in its own API's shape.
inline constexpr const char* kApiNative = "native";
inline constexpr const char* kApiCompletions = "completions";
inline constexpr const char* kApiChat = "chat";
inline constexpr const char* kApiChatThinking = "chat-thinking";

// Defaults follow the OpenAI completions API where it has one.
struct RequestLine {
  std::string id;  // "id" / "custom_id"; default "<file>:<line>"
  InputLocation input;
  std::string api = kApiNative;
  std::vector<int32_t> prompt_token_ids;   // a text prompt's ids once the reader tokenized it
  std::optional<std::string> prompt_text;  // the text of a text prompt
  bool add_special_tokens = true;          // text prompts: apply the tokenizer's template (BOS)
  int64_t max_tokens = 16;
  double temperature = 1.0;      // 0 = greedy
  double top_p = 1.0;            // (0, 1]
  int64_t top_k = 0;             // 0 (or -1 in the input) = off
  double min_p = 0.0;            // [0, 1]
  std::optional<uint64_t> seed;  // absent: derived from the job seed and the id
  std::vector<int32_t> stop_token_ids;
  std::vector<std::string> stop;  // stop strings (non-empty); need the tokenizer
  bool ignore_eos = false;
  int64_t min_tokens = 0;  // <= max_tokens
  // Per output token: absent/null = none, 0 = the chosen token's logprob, N = also the top N (<= 20).
  std::optional<int64_t> logprobs;
  // Per prompt token after the first: absent/null = none, N = its logprob given the tokens before
  // it and the top N there (0..20).
  std::optional<int64_t> prompt_logprobs;
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token id, bias in [-100, 100]), ids ascending
  std::vector<int32_t> allowed_token_ids;             // non-empty: only these may be sampled
  std::vector<int32_t> banned_token_ids;              // never sampled
};

struct RequestError {
  std::string id;  // the line's id if it could be read, else "<file>:<line>"
  InputLocation input;
  std::string message;  // "<file>:<line>: <reason>"
};

}  // namespace deepinfer::io
