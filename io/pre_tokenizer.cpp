#include "io/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <simdjson.h>

#include <algorithm>
#include <stdexcept>

namespace deepinfer::io {
namespace {

constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string get_string(const simdjson::dom::element& obj, const char* key, const std::string& where) {
  std::string_view s;
  if (obj[key].get(s) != simdjson::SUCCESS) {
    throw std::invalid_argument(where + ": missing or non-string key \"" + key + "\"");
  }
  return std::string(s);
}

bool get_bool_or(const simdjson::dom::element& obj, const char* key, bool fallback) {
  bool b;
  return obj[key].get(b) == simdjson::SUCCESS ? b : fallback;
}

SplitBehavior parse_behavior(const std::string& name, const std::string& where) {
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  throw std::invalid_argument(where + ".behavior: unsupported Split behavior \"" + name + "\"");
}

using Range = std::pair<std::size_t, std::size_t>;
struct Part {
  Range range;
  bool is_match;
};

// Applies a split behaviour (same folding as Hugging Face tokenizers' SplitDelimiterBehavior).
std::vector<Range> apply_behavior(std::vector<Part> parts, SplitBehavior behavior) {
  std::vector<Part> acc;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated: acc = std::move(parts); break;
    case SplitBehavior::kRemoved:
      for (const Part& p : parts)
        if (!p.is_match) acc.push_back(p);
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Part& p : parts) {
        if (p.is_match && !previous_match && !acc.empty())
          acc.back().range.second = p.range.second;
        else
          acc.push_back(p);
        previous_match = p.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->is_match && !previous_match && !acc.empty())
          acc.back().range.first = it->range.first;
        else
          acc.push_back(*it);
        previous_match = it->is_match;
      }
      std::reverse(acc.begin(), acc.end());
      break;
    case SplitBehavior::kContiguous:
      for (const Part& p : parts) {
        if (p.is_match == previous_match && !acc.empty())
          acc.back().range.second = p.range.second;
        else
          acc.push_back(p);
        previous_match = p.is_match;
      }
      break;
  }
  std::vector<Range> out;
  for (const Part& p : acc)
    if (p.range.second > p.range.first) out.push_back(p.range);
  return out;
}

}  // namespace

struct Regex::Impl {
  pcre2_code* code = nullptr;
};

Regex::Regex(const std::string& pattern, bool literal) : impl_(std::make_unique<Impl>()) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  // PCRE2_LITERAL refuses UCP (meaningless for a literal).
  const uint32_t options = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &error, &offset, nullptr);
  if (impl_->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    throw std::invalid_argument("regex \"" + pattern + "\" does not compile at offset " + std::to_string(offset) + ": " +
                                reinterpret_cast<char*>(message));
  }
  pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);  // optional: falls back to the interpreter
}

Regex::~Regex() { pcre2_code_free(impl_->code); }

std::vector<std::pair<std::size_t, std::size_t>> Regex::find_all(std::string_view text) const {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  pcre2_match_data* data = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  if (data == nullptr) throw std::runtime_error("pcre2_match_data_create failed");
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t start = 0;
  while (start <= text.size()) {
    const int rc = pcre2_match(impl_->code, subject, text.size(), start, 0, data, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(data);
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      throw std::runtime_error(std::string("pcre2_match failed: ") + reinterpret_cast<char*>(message));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data);
    out.emplace_back(ov[0], ov[1]);
    if (ov[1] > ov[0]) {
      start = ov[1];
    } else {  // empty match: the next search starts one character later (as onig's find_iter)
      start = ov[0] + 1;
      while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) ++start;
    }
  }
  pcre2_match_data_free(data);
  return out;
}

PreTokenizer PreTokenizer::from_json(const simdjson::dom::element& value, const std::string& where) {
  PreTokenizer result;
  if (!value.is_null()) result.parse_step(value, where);
  return result;
}

void PreTokenizer::parse_step(const simdjson::dom::element& value, const std::string& where) {
  if (!value.is_object()) throw std::invalid_argument(where + ": expected an object");
  const std::string type = get_string(value, "type", where);
  if (type == "Sequence") {
    simdjson::dom::array list;
    if (value["pretokenizers"].get(list) != simdjson::SUCCESS) {
      throw std::invalid_argument(where + ": Sequence needs an array \"pretokenizers\"");
    }
    std::size_t i = 0;
    for (const simdjson::dom::element item : list) {
      parse_step(item, where + ".pretokenizers[" + std::to_string(i++) + "]");
    }
  } else if (type == "Split") {
    if (get_bool_or(value, "invert", false)) {
      throw std::invalid_argument(where + ".invert: Split with invert=true is not supported");
    }
    simdjson::dom::element pattern;
    if (value["pattern"].get(pattern) != simdjson::SUCCESS || !pattern.is_object()) {
      throw std::invalid_argument(where + ".pattern: missing (expected {\"Regex\": ...} or {\"String\": ...})");
    }
    Step step;
    std::string_view text;
    try {
      if (pattern["Regex"].get(text) == simdjson::SUCCESS) {
        step.regex = std::make_shared<Regex>(std::string(text));
      } else if (pattern["String"].get(text) == simdjson::SUCCESS) {
        step.regex = std::make_shared<Regex>(std::string(text), /*literal=*/true);
      } else {
        throw std::invalid_argument("expected {\"Regex\": ...} or {\"String\": ...}");
      }
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(where + ".pattern: " + e.what());
    }
    step.behavior = parse_behavior(get_string(value, "behavior", where), where);
    steps_.push_back(std::move(step));
  } else if (type == "ByteLevel") {
    Step step;
    step.add_prefix_space = get_bool_or(value, "add_prefix_space", false);
    if (get_bool_or(value, "use_regex", true)) step.regex = std::make_shared<Regex>(kGpt2Pattern);
    has_byte_level_ = true;
    steps_.push_back(std::move(step));
  } else {
    throw std::invalid_argument(where + ": unsupported pre_tokenizer type \"" + type + "\" (supported: Sequence, Split, ByteLevel)");
  }
}

std::vector<std::string> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string> pieces;
  if (!text.empty()) pieces.emplace_back(text);
  for (const Step& step : steps_) {
    std::vector<std::string> next;
    next.reserve(pieces.size() * 2);
    for (std::string& piece : pieces) {
      if (step.add_prefix_space && piece.front() != ' ') piece.insert(piece.begin(), ' ');
      if (!step.regex) {
        next.push_back(std::move(piece));
        continue;
      }
      std::vector<Part> parts;
      std::size_t prev = 0;
      for (const auto& [b, e] : step.regex->find_all(piece)) {
        if (b > prev) parts.push_back({{prev, b}, false});
        parts.push_back({{b, e}, true});
        prev = e;
      }
      if (prev < piece.size()) parts.push_back({{prev, piece.size()}, false});
      for (const auto& [b, e] : apply_behavior(std::move(parts), step.behavior)) {
        next.emplace_back(piece.substr(b, e - b));
      }
    }
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace deepinfer::io
