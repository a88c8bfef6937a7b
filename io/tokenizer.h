#pragma once
// A byte-level BPE tokenizer loaded from a Hugging Face tokenizer.json, and an incremental
// UTF-8-safe detokenizer.
// Owns: model (BPE vocab + merges, "a b" or ["a","b"] form), added tokens (matched in the
// raw text before pre-tokenization, leftmost then longest first), the pre-tokenizer
// (io/pre_tokenizer.h), normalizer (only null / empty Sequence), post_processor
// (TemplateProcessing's "single" template, ByteLevel, Sequence; used when
// add_special_tokens), decoder (ByteLevel only). Unsupported pieces throw
// std::invalid_argument naming the file, key and type.
// Does not own: reading requests, stop strings (io/output_text.h), BOS/EOS from the model config
// (the request reader prepends the config's BOS when the template adds nothing).

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::io {

class Tokenizer final {
 public:
  // Throws std::invalid_argument naming `path` and the JSON key on malformed input.
  static std::shared_ptr<const Tokenizer> load(const std::string& path);
  // Same from the JSON text; `where` names the source in errors.
  static std::shared_ptr<const Tokenizer> from_json(std::string_view json, const std::string& where);
  ~Tokenizer();

  // Any bytes (invalid UTF-8 included) encode; byte-level BPE covers every byte.
  // add_special_tokens applies the post_processor's single template (e.g. a leading BOS).
  // Thread-safe.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;

  // Raw bytes of the ids (no U+FFFD repair: decode(encode(x)) == x for any bytes x).
  // Throws std::out_of_range for an id outside the vocabulary.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;

  // The raw bytes of one token (throws std::out_of_range unless contains(id)).
  const std::string& token_bytes(int32_t id) const;
  // Whether id names a token (a model's vocabulary may be larger than its tokenizer's).
  bool contains(int32_t id) const;
  bool is_special(int32_t id) const;
  int32_t vocab_size() const;  // 1 + the largest id
  // Whether add_special_tokens adds anything (a post_processor template with special tokens).
  bool template_adds_tokens() const;
  // Id of an exact token string (vocab or added token), or -1.
  int32_t token_to_id(std::string_view token) const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Turns ids into text one at a time, emitting only complete UTF-8: a multi-byte character
// split across tokens is held back until complete; a sequence that can never be valid is
// emitted as U+FFFD (like Hugging Face's lossy decode).
class Detokenizer final {
 public:
  explicit Detokenizer(std::shared_ptr<const Tokenizer> tokenizer, bool skip_special_tokens = false);
  // Text made complete by this id (possibly empty).
  std::string push(int32_t id);
  // Flushes what is held back (an unfinished character becomes U+FFFD).
  std::string finish();

 private:
  std::string drain(bool final);

  std::shared_ptr<const Tokenizer> tokenizer_;
  bool skip_special_tokens_;
  std::string pending_;
};

}  // namespace deepinfer::io
