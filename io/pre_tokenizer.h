#pragma once
// The pre-tokenizer of a Hugging Face tokenizer.json: splits raw text into pieces that
// BPE encodes independently. Supports `Split` (Regex or String pattern; behaviours
// Isolated, Removed, MergedWithPrevious, MergedWithNext, Contiguous; invert=false),
// `ByteLevel` (add_prefix_space, use_regex with the GPT-2 pattern) and `Sequence` of those.
// Any other type, or invert=true, is a std::invalid_argument naming the file, key and type.
// Regexes run through PCRE2 with UTF|UCP (\p{L}, \p{N} work) and MATCH_INVALID_UTF, so
// invalid UTF-8 input never fails: invalid bytes simply match nothing.
// Does not own: the byte-level char mapping or BPE (io/tokenizer.h).

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace simdjson::dom {
class element;
}

namespace deepinfer::io {

// A compiled PCRE2 pattern. Thread-safe for concurrent find_all calls.
class Regex final {
 public:
  explicit Regex(const std::string& pattern, bool literal = false);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  // Every match of the pattern in text, left to right, as [begin, end) byte offsets.
  // Empty matches are included (they split like HF's); the search then resumes one
  // character later.
  std::vector<std::pair<std::size_t, std::size_t>> find_all(std::string_view text) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

enum class SplitBehavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

class PreTokenizer final {
 public:
  // Parses a "pre_tokenizer" value (null allowed: the whole text is one piece).
  // `where` names the file and key for errors, e.g. "/x/tokenizer.json: pre_tokenizer".
  static PreTokenizer from_json(const simdjson::dom::element& value, const std::string& where);

  // Splits text into non-empty pieces (raw bytes, a prefix space included where added).
  std::vector<std::string> split(std::string_view text) const;

  // True when a ByteLevel step is present (the vocabulary is byte-level).
  bool has_byte_level() const { return has_byte_level_; }

 private:
  struct Step {
    std::shared_ptr<const Regex> regex;  // null: no splitting in this step
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool add_prefix_space = false;  // ByteLevel only
  };
  void parse_step(const simdjson::dom::element& value, const std::string& where);

  std::vector<Step> steps_;
  bool has_byte_level_ = false;
};

}  // namespace deepinfer::io
