// The generated tiny tokenizer: validity, round trips over a mixed corpus (invalid bytes
// included) and the incremental detokenizer's UTF-8 safety.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "io/tiny_tokenizer.h"
#include "io/tokenizer.h"
#include "io/utf8.h"

namespace deepinfer::io {
namespace {

std::shared_ptr<const Tokenizer> tiny() {
  static const auto tok = Tokenizer::from_json(tiny_tokenizer_json(512), "tiny");
  return tok;
}

std::vector<std::string> corpus() {
  std::vector<std::string> texts = {
      "Hello, world! The quick brown fox jumps over the lazy dog.",
      "int main() { return 0; }\n",
      "numbers 0 7 42 1234567890 3.14159 -12e5 1,000,000",
      "   leading and trailing spaces   ",
      "tabs\t\tand\n\nnewlines\r\n\r\n  \n\t end",
      "                                                                 ",
      "你好，世界。日本語のテキストとカタカナ。한국어 텍스트",
      "emoji 👍🏽 family 👨‍👩‍👧‍👦 flags 🇯🇵 🤖",
      "combining e\u0301 a\u0308 n\u0303 Z\u0351\u0352\u0353",
      "Ελληνικά, русский, العربية, עברית, हिन्दी",
      "invalid \xff\xfe bytes \xc3 truncated \xe4\xbd and surrogate \xed\xa0\x80 end \xf4\x90\x80\x80",
      "\xe4\xbd",
      "\x80",
      std::string("nul\0byte", 8),
      "special <｜begin▁of▁sentence｜> inside <｜end▁of▁sentence｜>text<｜end▁of▁sentence｜>",
      "<｜begin▁of▁sentence｜",
      "",
  };
  std::mt19937 rng(1234);
  for (int i = 0; i < 200; ++i) {  // random bytes, random valid code points
    std::string bytes, chars;
    const int n = static_cast<int>(rng() % 40);
    for (int j = 0; j < n; ++j) {
      bytes.push_back(static_cast<char>(rng() % 256));
      char32_t cp = rng() % 0x30000;
      if (cp >= 0xD800 && cp < 0xE000) cp = 'x';
      append_utf8(chars, cp);
    }
    texts.push_back(bytes);
    texts.push_back(chars);
  }
  return texts;
}

TEST(TinyTokenizer, IsValidAndDeterministic) {
  const auto tok = tiny();
  EXPECT_EQ(tok->vocab_size(), 512);
  EXPECT_EQ(tok->token_to_id("<｜begin▁of▁sentence｜>"), kTinyBosId);
  EXPECT_EQ(tok->token_to_id("<｜end▁of▁sentence｜>"), kTinyEosId);
  EXPECT_TRUE(tok->is_special(kTinyBosId));
  EXPECT_TRUE(tok->is_special(kTinyEosId));
  EXPECT_FALSE(tok->is_special(2));
  EXPECT_EQ(tok->token_bytes(2 + 'a'), "a");
  EXPECT_EQ(tiny_tokenizer_json(512), tiny_tokenizer_json(512));
  const std::string text = "the people of the town";
  EXPECT_LT(tok->encode(text, false).size(), text.size() / 2);  // merges learned from the corpus apply
  EXPECT_EQ(tok->encode("hi", true).front(), kTinyBosId);
  EXPECT_EQ(tok->encode("a<｜end▁of▁sentence｜>", false).back(), kTinyEosId);
  EXPECT_THROW(tiny_tokenizer_json(257), std::invalid_argument);
  EXPECT_EQ(Tokenizer::from_json(tiny_tokenizer_json(300), "tiny300")->vocab_size(), 300);
}

TEST(TinyTokenizer, RoundTripsEveryString) {
  const auto tok = tiny();
  for (const std::string& text : corpus()) {
    const auto ids = tok->encode(text, false);
    for (const int32_t id : ids) ASSERT_TRUE(id >= 0 && id < 512) << id;
    EXPECT_EQ(tok->decode(ids), text);
    const auto with_bos = tok->encode(text, true);
    ASSERT_FALSE(with_bos.empty());
    EXPECT_EQ(with_bos.front(), kTinyBosId);
    EXPECT_EQ(tok->decode(with_bos, /*skip_special_tokens=*/true),
              tok->decode(std::vector<int32_t>(with_bos.begin() + 1, with_bos.end()), true));
    EXPECT_EQ(tok->encode(text, false), ids);  // the cache returns the same
  }
}

TEST(Detokenizer, NeverEmitsBrokenUtf8) {
  const auto tok = tiny();
  int held_back = 0;
  for (const std::string& text : corpus()) {
    Detokenizer detok(tok);
    std::string joined;
    for (const int32_t id : tok->encode(text, false)) {
      const std::string chunk = detok.push(id);
      ASSERT_EQ(to_valid_utf8(chunk), chunk) << "broken chunk for: " << to_valid_utf8(text);
      if (chunk.empty() && !tok->token_bytes(id).empty()) ++held_back;
      joined += chunk;
    }
    const std::string rest = detok.finish();
    ASSERT_EQ(to_valid_utf8(rest), rest);
    joined += rest;
    EXPECT_EQ(joined, to_valid_utf8(text));
  }
  EXPECT_GT(held_back, 10);  // multi-byte characters really were split across tokens
}

TEST(Detokenizer, HoldsBackPartialCharacter) {
  const auto tok = tiny();
  Detokenizer detok(tok);
  // "€" = E2 82 AC, fed one byte token at a time (byte b is id 2 + b).
  EXPECT_EQ(detok.push(2 + 0xE2), "");
  EXPECT_EQ(detok.push(2 + 0x82), "");
  EXPECT_EQ(detok.push(2 + 0xAC), "€");
  EXPECT_EQ(detok.push(2 + 0xE2), "");
  EXPECT_EQ(detok.push(2 + 'x'), "\xEF\xBF\xBDx");  // can never complete: U+FFFD
  EXPECT_EQ(detok.push(2 + 0xF0), "");
  EXPECT_EQ(detok.finish(), "\xEF\xBF\xBD");
  Detokenizer skipping(tok, /*skip_special_tokens=*/true);
  EXPECT_EQ(skipping.push(kTinyBosId), "");
  EXPECT_EQ(skipping.push(2 + 'a'), "a");
}

TEST(Utf8, StepAndRepair) {
  EXPECT_EQ(utf8_step("a", 0), 1);
  EXPECT_EQ(utf8_step("\xC3\xA9", 0), 2);
  EXPECT_EQ(utf8_step("\xE2\x82", 0), 0);
  EXPECT_EQ(utf8_step("\xE2\x82x", 0), -2);
  EXPECT_EQ(utf8_step("\xED\xA0\x80", 0), -1);  // surrogate
  EXPECT_EQ(utf8_step("\xC0\x80", 0), -1);      // overlong
  EXPECT_EQ(to_valid_utf8("a\xFF"
                          "b\xE2\x82"),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD");
  std::string bytes;
  EXPECT_TRUE(from_byte_level(to_byte_level(std::string("\x00 \xff", 3)), bytes));
  EXPECT_EQ(bytes, std::string("\x00 \xff", 3));
  EXPECT_EQ(to_byte_level(" "), "Ġ");
}

}  // namespace
}  // namespace deepinfer::io
