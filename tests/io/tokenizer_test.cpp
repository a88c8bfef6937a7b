// Hand-checked encodings on a hand-written mini tokenizer.json, the pre-tokenizer's split
// behaviours, and errors for malformed files.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "io/pre_tokenizer.h"
#include "io/tokenizer.h"

namespace deepinfer::io {
namespace {

using Ids = std::vector<int32_t>;

// Merge ranks chosen so that rank order differs from longest-match order:
// "abcd" -> "ab" "cd" (by rank) rather than "abc" "d" (greedy by length).
std::string mini_json(bool pair_merges, const std::string& pre_tokenizer = "") {
  const std::string merges =
      pair_merges ? R"([["c","d"],["b","c"],["a","b"],["a","bc"],["Ġ","a"]])" : R"(["c d","b c","a b","a bc","Ġ a"])";
  const std::string pre =
      pre_tokenizer.empty() ? R"({"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true})" : pre_tokenizer;
  return R"({"version":"1.0","added_tokens":[
    {"id":10,"content":"<s>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true},
    {"id":11,"content":"[X]","special":false},
    {"id":12,"content":"[XY]","special":false}],
  "normalizer":null,
  "pre_tokenizer":)" +
         pre + R"(,
  "post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}},
     {"Sequence":{"id":"A","type_id":0}}],"special_tokens":{"<s>":{"id":"<s>","ids":[10],"tokens":["<s>"]}}},
  "decoder":{"type":"ByteLevel"},
  "model":{"type":"BPE","dropout":null,"unk_token":null,"vocab":{"a":0,"b":1,"c":2,"d":3,"Ġ":4,
     "ab":5,"bc":6,"abc":7,"Ġa":8,"cd":9,"<s>":10},"merges":)" +
         merges + "}}";
}

TEST(Tokenizer, MergesApplyByRankNotByLength) {
  for (const bool pair_form : {false, true}) {
    const auto tok = Tokenizer::from_json(mini_json(pair_form), "mini");
    EXPECT_EQ(tok->encode("abc", false), (Ids{7})) << pair_form;
    EXPECT_EQ(tok->encode("abcd", false), (Ids{5, 9})) << pair_form;  // greedy-by-length would be {7, 3}
    EXPECT_EQ(tok->encode(" ab", false), (Ids{4, 5})) << pair_form;   // (a,b) ranks before (Ġ,a)
    EXPECT_EQ(tok->encode(" a", false), (Ids{8})) << pair_form;
    EXPECT_EQ(tok->encode("ab ab", false), (Ids{5, 4, 5})) << pair_form;
    EXPECT_EQ(tok->encode("", false), (Ids{})) << pair_form;
  }
}

TEST(Tokenizer, AddedTokensMatchInRawTextLongestFirst) {
  const auto tok = Tokenizer::from_json(mini_json(false), "mini");
  EXPECT_EQ(tok->encode("ab<s>abc[X]d", false), (Ids{5, 10, 7, 11, 3}));
  EXPECT_EQ(tok->encode("[XY][X]", false), (Ids{12, 11}));
  EXPECT_EQ(tok->encode("<s<s>", false), (Ids{10}));  // "<" and "s" are not in the vocab: dropped like HF
  EXPECT_TRUE(tok->is_special(10));
  EXPECT_FALSE(tok->is_special(11));
  EXPECT_EQ(tok->decode({10, 5, 11}), "<s>ab[X]");
  EXPECT_EQ(tok->decode({10, 5, 11}, /*skip_special_tokens=*/true), "ab[X]");
}

TEST(Tokenizer, AddSpecialTokensUsesTemplate) {
  const auto tok = Tokenizer::from_json(mini_json(false), "mini");
  EXPECT_EQ(tok->encode("abc", true), (Ids{10, 7}));
  EXPECT_EQ(tok->encode("", true), (Ids{10}));
  EXPECT_EQ(tok->decode({8, 4, 9}), " a cd");
  EXPECT_THROW(tok->decode({13}), std::out_of_range);
  EXPECT_THROW(tok->decode({-1}), std::out_of_range);
  EXPECT_EQ(tok->token_to_id("Ġa"), 8);
  EXPECT_EQ(tok->token_to_id("zz"), -1);
}

TEST(Tokenizer, SplitSequenceIsolatesBeforeByteLevel) {
  // Splitting on "b" isolates it, so "ab" can no longer merge.
  const std::string pre = R"({"type":"Sequence","pretokenizers":[
    {"type":"Split","pattern":{"String":"b"},"behavior":"Isolated","invert":false},
    {"type":"ByteLevel","add_prefix_space":false,"use_regex":false}]})";
  const auto tok = Tokenizer::from_json(mini_json(false, pre), "mini");
  EXPECT_EQ(tok->encode("abcd", false), (Ids{0, 1, 9}));
}

std::vector<std::string> split_with(const std::string& step_json, std::string_view text) {
  simdjson::dom::parser parser;
  const simdjson::dom::element element = parser.parse(step_json);
  return PreTokenizer::from_json(element, "test").split(text);
}

std::string split_step(const std::string& pattern, const std::string& behavior) {
  return R"({"type":"Split","pattern":{"Regex":")" + pattern + R"("},"behavior":")" + behavior + R"(","invert":false})";
}

TEST(PreTokenizer, SplitBehaviours) {
  using V = std::vector<std::string>;
  EXPECT_EQ(split_with(split_step("-", "Isolated"), "a-b-"), (V{"a", "-", "b", "-"}));
  EXPECT_EQ(split_with(split_step("-", "Removed"), "a-b-"), (V{"a", "b"}));
  EXPECT_EQ(split_with(split_step("-", "MergedWithPrevious"), "a-b-"), (V{"a-", "b-"}));
  EXPECT_EQ(split_with(split_step("-", "MergedWithNext"), "a-b-"), (V{"a", "-b", "-"}));
  EXPECT_EQ(split_with(split_step("-", "Contiguous"), "a--b"), (V{"a", "--", "b"}));
}

TEST(PreTokenizer, UnicodeClassesAndInvalidBytes) {
  using V = std::vector<std::string>;
  EXPECT_EQ(split_with(split_step("\\\\p{L}+", "Isolated"), "héllo wörld 12"), (V{"héllo", " ", "wörld", " 12"}));
  EXPECT_EQ(split_with(split_step("\\\\p{N}{1,3}", "Isolated"), "x１２３4"), (V{"x", "１２３", "4"}));
  // Invalid UTF-8 never matches and never throws.
  EXPECT_EQ(split_with(split_step("\\\\p{L}+", "Isolated"), "ab\xff\xc3zz"), (V{"ab", "\xff\xc3", "zz"}));
  EXPECT_EQ(split_with(split_step("x*", "Isolated"), "abxx"), (V{"a", "b", "xx"}));  // empty matches skipped
}

class TokenizerErrors : public ::testing::Test {
 protected:
  std::string write(const std::string& text) {
    const auto dir = std::filesystem::temp_directory_path() / ("tok_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "tokenizer.json").string();
    std::ofstream(path) << text;
    return path;
  }
  void expect_error(const std::string& text, const std::vector<std::string>& needles) {
    const std::string path = write(text);
    try {
      Tokenizer::load(path);
      ADD_FAILURE() << "no error for " << text.substr(0, 80);
    } catch (const std::invalid_argument& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(path), std::string::npos) << message;
      for (const auto& needle : needles) EXPECT_NE(message.find(needle), std::string::npos) << message;
    }
  }
  static std::string replace(std::string text, const std::string& from, const std::string& to) {
    const auto pos = text.find(from);
    EXPECT_NE(pos, std::string::npos) << from;
    return text.replace(pos, from.size(), to);
  }
};

TEST_F(TokenizerErrors, NameFileAndKey) {
  const std::string good = mini_json(false);
  EXPECT_NO_THROW(Tokenizer::load(write(good)));
  expect_error("{not json", {"invalid JSON"});
  expect_error("[]", {"not an object"});
  expect_error(replace(good, R"("model":)", R"("modelx":)"), {"\"model\""});
  expect_error(replace(good, R"("type":"BPE")", R"("type":"WordPiece")"), {"model.type", "WordPiece"});
  expect_error(replace(good, R"("a bc")", R"("a zz")"), {"model.merges[3]", "zz"});
  expect_error(replace(good, R"("a bc")", R"("abc")"), {"model.merges[3]"});
  expect_error(replace(good, R"("ab":5)", R"("ab":"5")"), {"model.vocab[\"ab\"]"});
  expect_error(replace(good, R"("type":"ByteLevel","add)", R"("type":"Whitespace","add)"), {"pre_tokenizer", "Whitespace"});
  expect_error(replace(good, R"("normalizer":null)", R"("normalizer":{"type":"NFC"})"), {"normalizer", "NFC"});
  expect_error(replace(good, R"("decoder":{"type":"ByteLevel"})", R"("decoder":{"type":"Metaspace"})"), {"decoder", "Metaspace"});
  expect_error(replace(good, R"("id":11,"content":"[X]")", R"("id":11,"content":"")"), {"added_tokens[1]"});
  expect_error(replace(good, R"("lstrip":false)", R"("lstrip":true)"), {"added_tokens[0].lstrip"});
  expect_error(mini_json(false, split_step("(", "Isolated")), {"pre_tokenizer.pattern", "does not compile"});
  expect_error(mini_json(false, R"({"type":"Sequence","pretokenizers":[)" + split_step("a", "Weird") + "]}"),
               {"pretokenizers[0].behavior", "Weird"});
  expect_error(mini_json(false, R"({"type":"Sequence","pretokenizers":[)" + split_step("a", "Isolated") + "]}"), {"ByteLevel"});
  EXPECT_THROW(Tokenizer::load("/nonexistent/tokenizer.json"), std::invalid_argument);
}

}  // namespace
}  // namespace deepinfer::io
