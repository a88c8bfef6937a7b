#include "io/tiny_tokenizer.h"

#include <simdjson.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "io/durable_file.h"
#include "io/json_writer.h"
#include "io/pre_tokenizer.h"
#include "io/utf8.h"

namespace deepinfer::io {
namespace {

constexpr int32_t kFirstByteId = 2;
constexpr int32_t kFirstMergeId = kFirstByteId + 256;
static_assert(kFirstMergeId == kTinyMinVocabSize);

// DeepSeek-V3's tokenizer.json pre-tokenizer as recalled (three Isolated Splits, then
// ByteLevel without its own regex). Not checked byte for byte against the shipped file.
constexpr const char* kSplitPatterns[] = {
    R"re(\p{N}{1,3})re",
    R"re([一-龥぀-ゟ゠-ヿ]+)re",
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re",
};

constexpr const char* kCorpus = R"corpus(
The quick brown fox jumps over the lazy dog. The dog sleeps in the sun, and the fox runs
into the forest. In the morning the weather was cold, but in the afternoon it was warm and
the people of the town went out to the market to buy bread, fruit and vegetables.
A language model reads a prompt and writes the next token, one token at a time, until it
reaches the end of the sentence or the maximum number of tokens. The model is small, the
batch is large, and the tokens are generated in parallel for many requests at the same time.
Hello world! Hello, world. This is a test of the tokenizer: it should encode and decode
text without losing a single byte, including numbers like 12345, 2024 and 3.14159.
int main(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    std::printf("%s\n", argv[i]);
  }
  return 0;
}
def encode(text, add_special_tokens=True):
    ids = []
    for piece in split(text):
        ids.extend(bpe(piece))
    return ids

def decode(ids):
    return "".join(token(i) for i in ids)
struct Request { std::string prompt; std::vector<int32_t> tokens; int max_new_tokens = 16; };
if (request.tokens.empty()) { throw std::invalid_argument("empty prompt"); }
for the people, by the people, of the people; there is nothing that they cannot do when
they work together, and there is nothing that the world cannot learn from them.
She said that the answer was in the question, and the question was in the answer.
return the result of the function; the function returns the value of the variable.
Once upon a time there was a little girl who lived in a village near the forest. Whenever
she went out, the little girl wore a red riding cloak, so everyone in the village called her
Little Red Riding Hood. One morning her mother asked her to take some cake to her grandmother.
The tokenizer splits text into pieces, the pieces into bytes, and merges the most frequent
pairs of bytes first; the decoder turns every token back into its bytes and joins them.
class Scheduler: def step(self): batch = self.waiting[:self.max_batch]; self.running += batch
)corpus";

std::string pre_tokenizer_json() {
  std::string out = R"({"type":"Sequence","pretokenizers":[)";
  for (const char* pattern : kSplitPatterns) {
    out += R"({"type":"Split","pattern":{"Regex":)" + json_escape(pattern) + R"(},"behavior":"Isolated","invert":false},)";
  }
  out += R"({"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]})";
  return out;
}

struct Learned {
  std::vector<std::string> tokens;  // byte-level strings, index = id - kFirstByteId
  std::vector<std::pair<std::string, std::string>> merges;
};

Learned learn_merges(const std::string& pre_json, int32_t vocab_size) {
  Learned learned;
  for (int b = 0; b < 256; ++b) learned.tokens.push_back(to_byte_level(std::string(1, static_cast<char>(b))));
  simdjson::dom::parser parser;
  const simdjson::dom::element pre_element = parser.parse(pre_json);
  const PreTokenizer pre = PreTokenizer::from_json(pre_element, "tiny tokenizer pre_tokenizer");
  std::map<std::string, int64_t> word_counts;  // ordered: deterministic
  for (const std::string& piece : pre.split(kCorpus)) ++word_counts[piece];
  std::vector<std::pair<std::vector<int32_t>, int64_t>> words;
  for (const auto& [piece, count] : word_counts) {
    std::vector<int32_t> symbols;
    for (const char c : piece) symbols.push_back(static_cast<unsigned char>(c));  // index into tokens
    words.emplace_back(std::move(symbols), count);
  }
  std::unordered_map<std::string, int32_t> index;
  for (int32_t i = 0; i < 256; ++i) index.emplace(learned.tokens[i], i);
  while (kFirstByteId + static_cast<int32_t>(learned.tokens.size()) < vocab_size) {
    std::map<std::pair<int32_t, int32_t>, int64_t> pair_counts;
    for (const auto& [symbols, count] : words) {
      for (std::size_t i = 0; i + 1 < symbols.size(); ++i) pair_counts[{symbols[i], symbols[i + 1]}] += count;
    }
    std::pair<int32_t, int32_t> best{-1, -1};
    int64_t best_count = 0;
    for (const auto& [pair, count] : pair_counts) {
      if (count > best_count) {  // strict: ties keep the smallest pair
        best = pair;
        best_count = count;
      }
    }
    if (best.first < 0) break;
    const std::string merged = learned.tokens[best.first] + learned.tokens[best.second];
    auto [it, added] = index.emplace(merged, static_cast<int32_t>(learned.tokens.size()));
    if (added) learned.tokens.push_back(merged);
    learned.merges.emplace_back(learned.tokens[best.first], learned.tokens[best.second]);
    for (auto& [symbols, count] : words) {
      std::vector<int32_t> next;
      for (std::size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == best.first && symbols[i + 1] == best.second) {
          next.push_back(it->second);
          ++i;
        } else {
          next.push_back(symbols[i]);
        }
      }
      symbols = std::move(next);
    }
  }
  return learned;
}

std::string added_token_json(int32_t id, const char* content) {
  return R"({"id":)" + std::to_string(id) + R"(,"content":)" + json_escape(content) +
         R"(,"single_word":false,"lstrip":false,"rstrip":false,"normalized":true,"special":true})";
}

}  // namespace

std::string tiny_tokenizer_json(int32_t vocab_size) {
  if (vocab_size < kFirstMergeId) {
    throw std::invalid_argument("tiny tokenizer needs vocab_size >= " + std::to_string(kFirstMergeId) +
                                " (2 special + 256 byte tokens), got " + std::to_string(vocab_size));
  }
  const char* bos = "<｜begin▁of▁sentence｜>";
  const char* eos = "<｜end▁of▁sentence｜>";
  const std::string pre = pre_tokenizer_json();
  const Learned learned = learn_merges(pre, vocab_size);
  std::string out = R"({"version":"1.0","truncation":null,"padding":null,"added_tokens":[)";
  out += added_token_json(kTinyBosId, bos) + "," + added_token_json(kTinyEosId, eos) + "],\n";
  out += R"("normalizer":null,"pre_tokenizer":)" + pre + ",\n";
  out += R"("post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":)" + json_escape(bos) +
         R"(,"type_id":0}},{"Sequence":{"id":"A","type_id":0}}],"pair":[{"SpecialToken":{"id":)" + json_escape(bos) +
         R"(,"type_id":0}},{"Sequence":{"id":"A","type_id":0}},{"Sequence":{"id":"B","type_id":1}}],)" + R"("special_tokens":{)" +
         json_escape(bos) + R"(:{"id":)" + json_escape(bos) + R"(,"ids":[0],"tokens":[)" + json_escape(bos) + "]}}},\n";
  out += R"("decoder":{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true},)"
         "\n";
  out += R"("model":{"type":"BPE","dropout":null,"unk_token":null,"continuing_subword_prefix":null,)"
         R"("end_of_word_suffix":null,"fuse_unk":false,"byte_fallback":false,"ignore_merges":false,"vocab":{)";
  out += json_escape(bos) + ":0," + json_escape(eos) + ":1";
  for (std::size_t i = 0; i < learned.tokens.size(); ++i) {
    out += ",\n" + json_escape(learned.tokens[i]) + ":" + std::to_string(kFirstByteId + i);
  }
  out += "},\n\"merges\":[";
  for (std::size_t i = 0; i < learned.merges.size(); ++i) {
    out += (i ? ",\n[" : "\n[") + json_escape(learned.merges[i].first) + "," + json_escape(learned.merges[i].second) + "]";
  }
  out += "]}}\n";
  return out;
}

void write_tiny_tokenizer(const std::string& path, int32_t vocab_size) { write_file_atomically(path, tiny_tokenizer_json(vocab_size)); }

}  // namespace deepinfer::io
