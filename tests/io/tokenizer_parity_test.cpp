// Parity with Hugging Face `tokenizers` (issue 8). tests/data/tokenizer_parity/ holds a
// byte-level BPE tokenizer.json trained on the GPU machine with tokenizers 0.23.2 and
// DeepSeek-V3's pre-tokenizer (three Split regexes + ByteLevel), and 12,000 strings (ASCII,
// numbers, whitespace runs, CJK and kana, emoji, combining marks, mojibake and control
// characters, special tokens inside text) with the ids `tokenizers` gave them, without and with
// special tokens, and its decode. Made by tests/reference/tokenizer_parity.py; every string
// must encode to exactly those ids here and decode back to the same text.
#include <gtest/gtest.h>
#include <simdjson.h>
#include <zstd.h>

#include <cstdlib>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/durable_file.h"
#include "io/tokenizer.h"

namespace deepinfer::io {
namespace {

// The data folder (ctest sets DEEPINFER_SOURCE_DIR to the repository root).
std::string data_dir() {
  const char* root = std::getenv("DEEPINFER_SOURCE_DIR");
  if (root == nullptr) throw std::runtime_error("DEEPINFER_SOURCE_DIR is not set (run through ctest)");
  return std::string(root) + "/tests/data/tokenizer_parity/";
}

std::string decompress(const std::string& compressed) {
  std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> ctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  std::string out;
  std::vector<char> buffer(ZSTD_DStreamOutSize());
  ZSTD_inBuffer in{compressed.data(), compressed.size(), 0};
  while (in.pos < in.size) {
    ZSTD_outBuffer chunk{buffer.data(), buffer.size(), 0};
    const size_t rc = ZSTD_decompressStream(ctx.get(), &chunk, &in);
    if (ZSTD_isError(rc)) throw std::runtime_error(std::string("corpus.jsonl.zst: ") + ZSTD_getErrorName(rc));
    out.append(buffer.data(), chunk.pos);
  }
  return out;
}

std::vector<int32_t> ids_of(simdjson::dom::element line, const char* key) {
  std::vector<int32_t> ids;
  for (int64_t id : line[key].get_array()) ids.push_back(static_cast<int32_t>(id));
  return ids;
}

std::string show(const std::vector<int32_t>& ids) {
  std::ostringstream out;
  for (size_t i = 0; i < ids.size(); ++i) out << (i ? "," : "") << ids[i];
  return "[" + out.str() + "]";
}

TEST(TokenizerParity, MatchesHuggingFaceTokenizersOnTheCorpus) {
  const std::string dir = data_dir();
  const auto tokenizer = Tokenizer::load(dir + "tokenizer.json");
  const std::string corpus = decompress(read_file(dir + "corpus.jsonl.zst"));
  simdjson::dom::parser parser;
  int64_t lines = 0, plain_bad = 0, special_bad = 0, decode_bad = 0, shown = 0;
  std::istringstream stream(corpus);
  for (std::string text_line; std::getline(stream, text_line);) {
    ++lines;
    const simdjson::dom::element line = parser.parse(text_line);
    const std::string text{std::string_view(line["text"])};
    const std::string want_decoded{std::string_view(line["decoded"])};
    const std::vector<int32_t> want = ids_of(line, "ids"), want_special = ids_of(line, "ids_with_special");
    const std::vector<int32_t> got = tokenizer->encode(text, /*add_special_tokens=*/false);
    const std::vector<int32_t> got_special = tokenizer->encode(text, /*add_special_tokens=*/true);
    const std::string decoded = tokenizer->decode(got);
    plain_bad += got != want;
    special_bad += got_special != want_special;
    decode_bad += decoded != want_decoded || decoded != text;
    if ((got != want || got_special != want_special || decoded != text) && shown++ < 5) {
      ADD_FAILURE() << "line " << lines << " text \"" << text << "\"\n  tokenizers " << show(want) << "\n  ours       " << show(got)
                    << "\n  with special: tokenizers " << show(want_special) << ", ours " << show(got_special) << "\n  decoded \""
                    << decoded << "\"";
    }
  }
  std::cout << "[tokenizer_parity] " << lines << " strings: ids differ " << plain_bad << ", ids with special tokens differ " << special_bad
            << ", decode differs " << decode_bad << std::endl;
  EXPECT_GE(lines, 10000);
  EXPECT_EQ(plain_bad, 0);
  EXPECT_EQ(special_bad, 0);
  EXPECT_EQ(decode_bad, 0);
}

}  // namespace
}  // namespace deepinfer::io
