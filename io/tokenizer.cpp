#include "io/tokenizer.h"

#include <simdjson.h>

#include <algorithm>
#include <array>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include "io/pre_tokenizer.h"
#include "io/utf8.h"

namespace deepinfer::io {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

namespace {

constexpr std::size_t kMaxCachedPiece = 256;
constexpr std::size_t kMaxCacheEntries = 1 << 18;

[[noreturn]] void fail(const std::string& where, const std::string& what) { throw std::invalid_argument(where + ": " + what); }

std::string type_of(const element& value, const std::string& where) {
  std::string_view type;
  if (!value.is_object() || value["type"].get(type) != simdjson::SUCCESS) fail(where, "missing string \"type\"");
  return std::string(type);
}

bool bool_or(const element& obj, const char* key, bool fallback) {
  bool b;
  return obj[key].get(b) == simdjson::SUCCESS ? b : fallback;
}

uint64_t pair_key(int32_t a, int32_t b) { return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b); }

struct Merge {
  int32_t rank;
  int32_t id;
};

struct AddedToken {
  std::string content;
  int32_t id;
};

}  // namespace

struct Tokenizer::Impl {
  std::vector<std::string> id_bytes;
  std::vector<char> id_valid;
  std::vector<char> id_special;
  std::unordered_map<std::string, int32_t> token_ids;  // token strings as in the JSON
  std::array<int32_t, 256> byte_id{};
  std::unordered_map<uint64_t, Merge> merges;
  std::array<std::vector<AddedToken>, 256> added_by_first_byte;  // longest first
  PreTokenizer pre;
  std::vector<int32_t> template_prefix, template_suffix;
  bool ignore_merges = false;
  int32_t unk_id = -1;
  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache;

  void set_token(int32_t id, std::string_view token, bool special, const std::string& where);
  void parse_model(const element& model, const std::string& where);
  void parse_post_processor(const element& value, const std::string& where);
  void bpe(std::string_view piece, std::vector<int32_t>& out) const;
  void encode_segment(std::string_view text, std::vector<int32_t>& out) const;
};

void Tokenizer::Impl::set_token(int32_t id, std::string_view token, bool special, const std::string& where) {
  if (id < 0 || id > (1 << 26)) fail(where, "token id " + std::to_string(id) + " out of range");
  if (static_cast<std::size_t>(id) >= id_bytes.size()) {
    id_bytes.resize(id + 1);
    id_valid.resize(id + 1, 0);
    id_special.resize(id + 1, 0);
  }
  std::string bytes;
  if (!from_byte_level(token, bytes)) bytes.assign(token);  // like HF's ByteLevel decoder
  id_bytes[id] = std::move(bytes);
  id_valid[id] = 1;
  id_special[id] = special ? 1 : 0;
  token_ids[std::string(token)] = id;
}

void Tokenizer::Impl::parse_model(const element& model, const std::string& where) {
  const std::string type = type_of(model, where);
  if (type != "BPE") fail(where + ".type", "unsupported model type \"" + type + "\" (only BPE)");
  element dropout;
  if (model["dropout"].get(dropout) == simdjson::SUCCESS && !dropout.is_null()) {
    fail(where + ".dropout", "BPE dropout is not supported");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    std::string_view s;
    if (model[key].get(s) == simdjson::SUCCESS && !s.empty()) fail(where + "." + key, "not supported");
  }
  if (bool_or(model, "byte_fallback", false)) fail(where + ".byte_fallback", "byte_fallback=true is not supported");
  ignore_merges = bool_or(model, "ignore_merges", false);

  object vocab;
  if (model["vocab"].get(vocab) != simdjson::SUCCESS) fail(where + ".vocab", "missing or not an object");
  for (const auto field : vocab) {
    int64_t id;
    if (field.value.get(id) != simdjson::SUCCESS) {
      fail(where + ".vocab[\"" + std::string(field.key) + "\"]", "id is not an integer");
    }
    set_token(static_cast<int32_t>(id), field.key, false, where + ".vocab");
  }
  std::string_view unk;
  if (model["unk_token"].get(unk) == simdjson::SUCCESS) {
    const auto it = token_ids.find(std::string(unk));
    if (it == token_ids.end()) fail(where + ".unk_token", "\"" + std::string(unk) + "\" is not in the vocab");
    unk_id = it->second;
  }

  array merge_list;
  if (model["merges"].get(merge_list) != simdjson::SUCCESS) fail(where + ".merges", "missing or not an array");
  int32_t rank = 0;
  for (const element item : merge_list) {
    const std::string at = where + ".merges[" + std::to_string(rank) + "]";
    std::string a, b;
    std::string_view s;
    array pair;
    if (item.get(s) == simdjson::SUCCESS) {
      const auto space = s.find(' ');
      if (space == std::string_view::npos || s.find(' ', space + 1) != std::string_view::npos) {
        fail(at, "merge \"" + std::string(s) + "\" is not two tokens separated by one space");
      }
      a = s.substr(0, space);
      b = s.substr(space + 1);
    } else if (item.get(pair) == simdjson::SUCCESS && pair.size() == 2) {
      std::string_view sa, sb;
      if (pair.at(0).get(sa) != simdjson::SUCCESS || pair.at(1).get(sb) != simdjson::SUCCESS) {
        fail(at, "merge pair must hold two strings");
      }
      a = sa;
      b = sb;
    } else {
      fail(at, "merge must be \"a b\" or [\"a\", \"b\"]");
    }
    const auto ia = token_ids.find(a), ib = token_ids.find(b), iab = token_ids.find(a + b);
    if (ia == token_ids.end() || ib == token_ids.end() || iab == token_ids.end()) {
      fail(at, "merge (\"" + a + "\", \"" + b + "\") uses a token missing from the vocab");
    }
    merges.emplace(pair_key(ia->second, ib->second), Merge{rank, iab->second});  // first rank wins
    ++rank;
  }
  for (int byte = 0; byte < 256; ++byte) {
    const auto it = token_ids.find(to_byte_level(std::string(1, static_cast<char>(byte))));
    byte_id[byte] = it == token_ids.end() ? unk_id : it->second;
  }
}

void Tokenizer::Impl::parse_post_processor(const element& value, const std::string& where) {
  if (value.is_null()) return;
  const std::string type = type_of(value, where);
  if (type == "ByteLevel") return;  // offsets only; ids unchanged
  if (type == "Sequence") {
    array list;
    if (value["processors"].get(list) != simdjson::SUCCESS) fail(where + ".processors", "missing array");
    std::size_t i = 0;
    for (const element item : list) parse_post_processor(item, where + ".processors[" + std::to_string(i++) + "]");
    return;
  }
  if (type != "TemplateProcessing") {
    fail(where, "unsupported post_processor type \"" + type + "\" (supported: TemplateProcessing, ByteLevel, Sequence)");
  }
  array single;
  if (value["single"].get(single) != simdjson::SUCCESS) fail(where + ".single", "missing array");
  template_prefix.clear();
  template_suffix.clear();
  bool seen_sequence = false;
  for (const element piece : single) {
    if (piece["Sequence"].error() == simdjson::SUCCESS) {
      seen_sequence = true;
      continue;
    }
    std::string_view name;
    if (piece["SpecialToken"]["id"].get(name) != simdjson::SUCCESS) {
      fail(where + ".single", "item is neither Sequence nor SpecialToken");
    }
    array ids;
    if (value["special_tokens"][name]["ids"].get(ids) != simdjson::SUCCESS) {
      fail(where + ".special_tokens", "no ids for \"" + std::string(name) + "\"");
    }
    for (const element id : ids) {
      int64_t v;
      if (id.get(v) != simdjson::SUCCESS) fail(where + ".special_tokens." + std::string(name), "id is not an integer");
      (seen_sequence ? template_suffix : template_prefix).push_back(static_cast<int32_t>(v));
    }
  }
}

std::shared_ptr<const Tokenizer> Tokenizer::load(const std::string& path) {
  simdjson::padded_string json;
  if (simdjson::padded_string::load(path).get(json) != simdjson::SUCCESS) {
    throw std::invalid_argument(path + ": cannot read tokenizer file");
  }
  return from_json(std::string_view(json.data(), json.size()), path);
}

std::shared_ptr<const Tokenizer> Tokenizer::from_json(std::string_view json, const std::string& where) {
  simdjson::dom::parser parser;
  element root;
  if (const auto error = parser.parse(json.data(), json.size()).get(root); error != simdjson::SUCCESS) {
    fail(where, std::string("invalid JSON: ") + simdjson::error_message(error));
  }
  if (!root.is_object()) fail(where, "top level is not an object");
  auto impl = std::make_unique<Impl>();

  element normalizer;
  if (root["normalizer"].get(normalizer) == simdjson::SUCCESS && !normalizer.is_null()) {
    const std::string type = type_of(normalizer, where + ": normalizer");
    array list;
    if (type != "Sequence" || normalizer["normalizers"].get(list) != simdjson::SUCCESS || list.size() != 0) {
      fail(where + ": normalizer", "unsupported normalizer \"" + type + "\" (only null or an empty Sequence)");
    }
  }
  element model;
  if (root["model"].get(model) != simdjson::SUCCESS) fail(where, "missing key \"model\"");
  impl->parse_model(model, where + ": model");

  array added;
  if (root["added_tokens"].get(added) == simdjson::SUCCESS) {
    std::size_t i = 0;
    for (const element token : added) {
      const std::string at = where + ": added_tokens[" + std::to_string(i++) + "]";
      int64_t id;
      std::string_view content;
      if (token["id"].get(id) != simdjson::SUCCESS) fail(at, "missing integer \"id\"");
      if (token["content"].get(content) != simdjson::SUCCESS || content.empty()) {
        fail(at, "missing non-empty string \"content\"");
      }
      for (const char* key : {"lstrip", "rstrip", "single_word"}) {
        if (bool_or(token, key, false)) fail(at + "." + key, "true is not supported");
      }
      impl->set_token(static_cast<int32_t>(id), content, bool_or(token, "special", false), at);
      auto& bucket = impl->added_by_first_byte[static_cast<unsigned char>(content[0])];
      bucket.push_back({std::string(content), static_cast<int32_t>(id)});
      std::stable_sort(bucket.begin(), bucket.end(),
                       [](const AddedToken& x, const AddedToken& y) { return x.content.size() > y.content.size(); });
    }
  }

  element pre;
  if (root["pre_tokenizer"].get(pre) != simdjson::SUCCESS) fail(where, "missing key \"pre_tokenizer\"");
  impl->pre = PreTokenizer::from_json(pre, where + ": pre_tokenizer");
  if (!impl->pre.has_byte_level()) {
    fail(where + ": pre_tokenizer", "no ByteLevel step: only byte-level BPE tokenizers are supported");
  }
  element decoder;
  if (root["decoder"].get(decoder) != simdjson::SUCCESS) fail(where, "missing key \"decoder\"");
  std::string decoder_type = type_of(decoder, where + ": decoder");
  if (decoder_type == "Sequence") {
    array list;
    if (decoder["decoders"].get(list) != simdjson::SUCCESS || list.size() != 1) {
      fail(where + ": decoder", "only a Sequence holding one ByteLevel decoder is supported");
    }
    element first;
    if (list.at(0).get(first) != simdjson::SUCCESS) fail(where + ": decoder.decoders[0]", "missing");
    decoder_type = type_of(first, where + ": decoder.decoders[0]");
  }
  if (decoder_type != "ByteLevel") fail(where + ": decoder", "unsupported decoder \"" + decoder_type + "\" (only ByteLevel)");

  element post;
  if (root["post_processor"].get(post) == simdjson::SUCCESS && !post.is_null())
    impl->parse_post_processor(post, where + ": post_processor");
  return std::shared_ptr<const Tokenizer>(new Tokenizer(std::move(impl)));
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

void Tokenizer::Impl::bpe(std::string_view piece, std::vector<int32_t>& out) const {
  if (ignore_merges) {
    const auto it = token_ids.find(to_byte_level(piece));
    if (it != token_ids.end()) {
      out.push_back(it->second);
      return;
    }
  }
  std::vector<int32_t> symbols;
  symbols.reserve(piece.size());
  for (const char c : piece) {
    const int32_t id = byte_id[static_cast<unsigned char>(c)];
    if (id >= 0) symbols.push_back(id);  // a byte missing from the vocab without unk is dropped, like HF
  }
  while (symbols.size() > 1) {
    int32_t best_rank = INT32_MAX, best_id = -1;
    std::size_t best_pos = 0;
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
      const auto it = merges.find(pair_key(symbols[i], symbols[i + 1]));
      if (it != merges.end() && it->second.rank < best_rank) {
        best_rank = it->second.rank;
        best_id = it->second.id;
        best_pos = i;
      }
    }
    if (best_id < 0) break;
    symbols[best_pos] = best_id;
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best_pos) + 1);
  }
  out.insert(out.end(), symbols.begin(), symbols.end());
}

void Tokenizer::Impl::encode_segment(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  for (const std::string& piece : pre.split(text)) {
    if (piece.size() > kMaxCachedPiece) {
      bpe(piece, out);
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(cache_mutex);
      const auto it = cache.find(piece);
      if (it != cache.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        continue;
      }
    }
    std::vector<int32_t> ids;
    bpe(piece, ids);
    out.insert(out.end(), ids.begin(), ids.end());
    std::lock_guard<std::mutex> lock(cache_mutex);
    if (cache.size() >= kMaxCacheEntries) cache.clear();
    cache.emplace(piece, std::move(ids));
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int32_t> out;
  if (add_special_tokens) out = impl_->template_prefix;
  std::size_t segment = 0, pos = 0;
  while (pos < text.size()) {
    bool matched = false;
    for (const AddedToken& token : impl_->added_by_first_byte[static_cast<unsigned char>(text[pos])]) {
      if (text.substr(pos, token.content.size()) == token.content) {
        impl_->encode_segment(text.substr(segment, pos - segment), out);
        out.push_back(token.id);
        pos += token.content.size();
        segment = pos;
        matched = true;
        break;
      }
    }
    if (!matched) ++pos;
  }
  impl_->encode_segment(text.substr(segment), out);
  if (add_special_tokens) out.insert(out.end(), impl_->template_suffix.begin(), impl_->template_suffix.end());
  return out;
}

bool Tokenizer::contains(int32_t id) const { return id >= 0 && id < vocab_size() && impl_->id_valid[id]; }

const std::string& Tokenizer::token_bytes(int32_t id) const {
  if (!contains(id)) {
    throw std::out_of_range("token id " + std::to_string(id) + " is not in the vocabulary (size " + std::to_string(vocab_size()) + ")");
  }
  return impl_->id_bytes[id];
}

bool Tokenizer::is_special(int32_t id) const { return id >= 0 && id < vocab_size() && impl_->id_special[id]; }

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->id_bytes.size()); }

bool Tokenizer::template_adds_tokens() const { return !impl_->template_prefix.empty() || !impl_->template_suffix.empty(); }

int32_t Tokenizer::token_to_id(std::string_view token) const {
  const auto it = impl_->token_ids.find(std::string(token));
  return it == impl_->token_ids.end() ? -1 : it->second;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::string out;
  for (const int32_t id : ids) {
    const std::string& bytes = token_bytes(id);
    if (!(skip_special_tokens && is_special(id))) out += bytes;
  }
  return out;
}

}  // namespace deepinfer::io
