#include "io/request_reader.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "io/tiny_tokenizer.h"
#include "io/tokenizer.h"
#include "tests/testing/temp_dir.h"

namespace deepinfer::io {
namespace {

RequestItem parse(std::string_view line, int64_t vocab = 1000) {
  return parse_request_line(line, InputLocation{"in.jsonl", 7}, RequestParseOptions{.vocab_size = vocab});
}

// Takes the item by value: a reference into a temporary RequestItem would dangle.
RequestLine ok(const RequestItem& item) {
  if (auto* error = std::get_if<RequestError>(&item)) ADD_FAILURE() << "unexpected error: " << error->message;
  return std::get<RequestLine>(item);
}

std::string error_of(const RequestItem& item) {
  if (std::holds_alternative<RequestLine>(item)) {
    ADD_FAILURE() << "expected an error record";
    return "";
  }
  return std::get<RequestError>(item).message;
}

TEST(RequestLineTest, FullNativeForm) {
  const auto item = parse(R"({"id": "q1", "prompt_token_ids": [5, 6, 7], "max_tokens": 64, "temperature": 0.7, "top_p": 0.9,
     "top_k": 50, "min_p": 0.05, "seed": 7, "stop_token_ids": [1], "ignore_eos": true, "min_tokens": 3, "logprobs": 2})");
  const auto& r = ok(item);
  EXPECT_EQ(r.id, "q1");
  EXPECT_EQ(r.prompt_token_ids, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(r.max_tokens, 64);
  EXPECT_DOUBLE_EQ(r.temperature, 0.7);
  EXPECT_DOUBLE_EQ(r.top_p, 0.9);
  EXPECT_EQ(r.top_k, 50);
  EXPECT_DOUBLE_EQ(r.min_p, 0.05);
  ASSERT_TRUE(r.seed.has_value());
  EXPECT_EQ(*r.seed, 7u);
  EXPECT_EQ(r.stop_token_ids, (std::vector<int32_t>{1}));
  EXPECT_TRUE(r.ignore_eos);
  EXPECT_EQ(r.min_tokens, 3);
  EXPECT_EQ(r.logprobs, 2);
  EXPECT_EQ(r.input.file, "in.jsonl");
  EXPECT_EQ(r.input.line, 7);
}

TEST(RequestLineTest, DefaultsAndDefaultId) {
  const RequestLine r = ok(parse(R"({"prompt_token_ids": [1]})"));
  EXPECT_EQ(r.id, "in.jsonl:7");
  EXPECT_EQ(r.max_tokens, 16);
  EXPECT_DOUBLE_EQ(r.temperature, 1.0);
  EXPECT_DOUBLE_EQ(r.top_p, 1.0);
  EXPECT_EQ(r.top_k, 0);
  EXPECT_DOUBLE_EQ(r.min_p, 0.0);
  EXPECT_FALSE(r.seed.has_value());
  EXPECT_FALSE(r.ignore_eos);
  EXPECT_EQ(r.min_tokens, 0);
  EXPECT_FALSE(r.logprobs.has_value());
}

TEST(RequestLineTest, LargestSeedAndTopKMinusOne) {
  const RequestLine r = ok(parse(R"({"prompt_token_ids": [1], "seed": 18446744073709551615, "top_k": -1})"));
  EXPECT_EQ(*r.seed, UINT64_MAX);
  EXPECT_EQ(r.top_k, 0);
}

TEST(RequestLineTest, OpenAiBatchForm) {
  const RequestLine r = ok(parse(R"({"custom_id": "req-9", "method": "POST", "url": "/v1/completions",
      "body": {"model": "x", "prompt": [3, 4], "max_tokens": 5, "temperature": 0}})"));
  EXPECT_EQ(r.id, "req-9");
  EXPECT_EQ(r.prompt_token_ids, (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(r.max_tokens, 5);
  EXPECT_DOUBLE_EQ(r.temperature, 0.0);
}

struct BadCase {
  const char* line;
  const char* expected;  // substring of the message
};

class BadRequestLineTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadRequestLineTest, BecomesAnErrorNamingFileLineAndReason) {
  const std::string message = error_of(parse(GetParam().line));
  EXPECT_NE(message.find("in.jsonl:7: "), std::string::npos) << message;
  EXPECT_NE(message.find(GetParam().expected), std::string::npos) << message;
}

INSTANTIATE_TEST_SUITE_P(
    AllKinds, BadRequestLineTest,
    ::testing::Values(
        BadCase{R"({"id": "a", "prompt_token_ids": [1],)", "invalid JSON"}, BadCase{"not json", "invalid JSON"},
        BadCase{"[1, 2]", "must be a JSON object, got an array"},
        BadCase{"{\"id\": \"\xff\xfe\", \"prompt_token_ids\": [1]}", "invalid UTF-8"},
        BadCase{"\xEF\xBB\xBF{\"prompt_token_ids\": [1]}", "byte order mark"}, BadCase{"{\"prompt_token_ids\": [1]}\r", "CRLF"},
        BadCase{R"({"id": 5, "prompt_token_ids": [1]})", "field 'id' must be a string, got an integer"},
        BadCase{R"({"id": "", "prompt_token_ids": [1]})", "field 'id' is empty"}, BadCase{R"({"id": "a"})", "missing 'prompt_token_ids'"},
        BadCase{R"({"prompt_token_ids": []})", "empty prompt"}, BadCase{R"({"prompt": ""})", "empty prompt"},
        BadCase{R"({"prompt_token_ids": [1], "prompt": "x"})", "only one of"},
        BadCase{R"({"prompt_token_ids": "1 2"})", "must be an array of token ids, got a string"},
        BadCase{R"({"prompt_token_ids": [1, -2]})", "'prompt_token_ids'[1] = -2 is not a token id"},
        BadCase{R"({"prompt_token_ids": [1, 1000]})", "'prompt_token_ids'[1] = 1000 is not a token id in [0, 999]"},
        BadCase{R"({"prompt_token_ids": [1.5]})", "'prompt_token_ids'[0] = 1.5"},
        BadCase{R"({"prompt_token_ids": [1], "max_tokens": 0})", "field 'max_tokens' = 0 is out of range"},
        BadCase{R"({"prompt_token_ids": [1], "max_tokens": "5"})", "field 'max_tokens' must be an integer, got a string"},
        BadCase{R"({"prompt_token_ids": [1], "max_tokens": 5.0})", "must be an integer, got a number"},
        BadCase{R"({"prompt_token_ids": [1], "temperature": -0.1})", "field 'temperature' = -0.1 is out of range"},
        BadCase{R"({"prompt_token_ids": [1], "top_p": 0})", "field 'top_p' = 0 is out of range (0, 1]"},
        BadCase{R"({"prompt_token_ids": [1], "top_p": 1.5})", "out of range (0, 1]"},
        BadCase{R"({"prompt_token_ids": [1], "top_k": -2})", "field 'top_k' = -2 is out of range"},
        BadCase{R"({"prompt_token_ids": [1], "min_p": 2})", "field 'min_p' = 2 is out of range"},
        BadCase{R"({"prompt_token_ids": [1], "seed": -1})", "field 'seed' = -1"},
        BadCase{R"({"prompt_token_ids": [1], "seed": 18446744073709551616})",
                "integer 18446744073709551616 is outside the 64-bit range [-2^63, 2^64-1]"},
        BadCase{R"({"id": "123456789012345678901", "prompt_token_ids": [1, 2, -9223372036854775809]})",
                "integer -9223372036854775809 is outside the 64-bit range"},
        BadCase{R"({"id": "123456789012345678901", "prompt_token_ids": [1],)", "invalid JSON"},
        BadCase{R"({"prompt_token_ids": [1], "ignore_eos": 1})", "field 'ignore_eos' must be a boolean"},
        BadCase{R"({"prompt_token_ids": [1], "max_tokens": 4, "min_tokens": 5})", "min_tokens = 5 exceeds max_tokens = 4"},
        BadCase{R"({"prompt_token_ids": [1], "logprobs": 21})", "field 'logprobs' = 21 is out of range [0, 20]"},
        BadCase{R"({"prompt_token_ids": [1], "prompt_logprobs": -1})", "field 'prompt_logprobs' = -1 is out of range [0, 20]"},
        BadCase{R"({"prompt_token_ids": [1], "max_token": 5})", "unknown field 'max_token'"},
        BadCase{R"({"prompt_token_ids": [1], "max_tokens": 5, "max_tokens": 6})", "field 'max_tokens' appears twice"},
        BadCase{R"({"prompt_token_ids": [1], "n": 2})", "field 'n'"}, BadCase{R"({"prompt": "hello"})", "text prompts need the tokenizer"},
        BadCase{R"({"prompt_token_ids": [1], "stop": ["x"]})", "field 'stop' (stop strings) needs the tokenizer"},
        BadCase{R"({"prompt_token_ids": [1], "stop": "x"})", "field 'stop' (stop strings) needs the tokenizer"},
        BadCase{R"({"prompt_token_ids": [1], "stop": 5})", "field 'stop' must be a string, an array of strings or null"},
        BadCase{R"({"prompt_token_ids": [1], "stop": ["a", 2]})", "field 'stop'[1] must be a string, got an integer"},
        BadCase{R"({"prompt_token_ids": [1], "stop": [""]})", "field 'stop'[0] is an empty stop string"},
        BadCase{R"({"prompt_token_ids": [1], "add_special_tokens": 1})", "field 'add_special_tokens' must be a boolean"},
        BadCase{R"({"custom_id": "c", "url": "/v1/embeddings", "body": {"prompt": [1]}})",
                "only \"/v1/completions\" and \"/v1/chat/completions\""},
        BadCase{R"({"custom_id": "c", "method": "GET", "url": "/v1/completions", "body": {"prompt": [1]}})",
                "field 'method' must be \"POST\""},
        BadCase{R"({"custom_id": "c", "url": "/v1/completions"})", "missing object field 'body'"},
        BadCase{R"({"custom_id": "c", "url": "/v1/completions", "body": "x"})", "field 'body' must be an object, got a string"},
        BadCase{R"({"id": "c", "url": "/v1/completions", "body": {"prompt": [1]}})", "takes its id as 'custom_id', not 'id'"},
        BadCase{R"({"custom_id": "c", "id": "d", "url": "/v1/completions", "body": {"prompt": [1]}})",
                "give 'custom_id' or 'id', not both"},
        BadCase{R"({"prompt_token_ids": null})", "must be an array of token ids, got null"},
        BadCase{R"({"prompt_token_ids": [1], "temperature": 1e-30})", "field 'temperature' = 1e-30 is below 1e-6"},
        BadCase{R"({"prompt_token_ids": [1], "top_p": 1e-300})", "field 'top_p' = 1e-300 is below the smallest float32"},
        BadCase{R"({"custom_id": "c", "url": "/v1/completions", "body": {"prompt": [1], "custom_id": "d"}})", "not allowed inside body"},
        BadCase{R"({"custom_id": "c", "url": "/v1/completions", "body": {"prompt": [1], "best_of": 2}})", "unknown field 'body.best_of'"}));

TEST(RequestLineTest, LogprobsLogitBiasAndTokenLists) {
  auto r = std::get<RequestLine>(parse(
      R"({"prompt_token_ids": [1], "logprobs": 0, "logit_bias": {"12": -100, "3": 2.5}, "allowed_token_ids": [3, 4], "banned_token_ids": [4]})"));
  EXPECT_EQ(r.logprobs, 0) << "0 asks for the chosen token's logprob";
  EXPECT_EQ(r.logit_bias, (std::vector<std::pair<int32_t, float>>{{3, 2.5f}, {12, -100.0f}}));
  EXPECT_EQ(r.allowed_token_ids, (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(r.banned_token_ids, (std::vector<int32_t>{4}));
  EXPECT_FALSE(std::get<RequestLine>(parse(R"({"prompt_token_ids": [1]})")).logprobs.has_value());
  EXPECT_FALSE(std::get<RequestLine>(parse(R"({"prompt_token_ids": [1], "logprobs": null})")).logprobs.has_value());
  EXPECT_EQ(std::get<RequestLine>(parse(R"({"prompt_token_ids": [1, 2], "prompt_logprobs": 3})")).prompt_logprobs, 3);
  EXPECT_FALSE(std::get<RequestLine>(parse(R"({"prompt_token_ids": [1], "prompt_logprobs": null})")).prompt_logprobs.has_value());
  EXPECT_FALSE(std::get<RequestLine>(parse(R"({"prompt_token_ids": [1]})")).prompt_logprobs.has_value());
  for (const auto& [line, expected] : std::vector<std::pair<std::string, std::string>>{
           {R"({"prompt_token_ids": [1], "logit_bias": {"x": 1}})", "field 'logit_bias' key \"x\" is not a token id in [0, 999]"},
           {R"({"prompt_token_ids": [1], "logit_bias": {"1000": 1}})", "key \"1000\" is not a token id"},
           {R"({"prompt_token_ids": [1], "logit_bias": {"5": 101}})", "field 'logit_bias[\"5\"]' = 101 is out of range [-100, 100]"},
           {R"({"prompt_token_ids": [1], "logit_bias": {"5": 1, "05": 2}})", "names token 5 twice"},
           {R"({"prompt_token_ids": [1], "logit_bias": [1]})", "field 'logit_bias' must be an object"},
           {R"({"prompt_token_ids": [1], "banned_token_ids": [1000]})", "'banned_token_ids'[0] = 1000 is not a token id"}}) {
    const std::string message = error_of(parse(line));
    EXPECT_NE(message.find(expected), std::string::npos) << line << " -> " << message;
  }
}

TEST(RequestLineTest, ErrorKeepsTheIdWhenReadable) {
  const auto item = parse(R"({"id": "keep-me", "prompt_token_ids": [1], "top_p": 3})");
  ASSERT_TRUE(std::holds_alternative<RequestError>(item));
  EXPECT_EQ(std::get<RequestError>(item).id, "keep-me");
  EXPECT_EQ(std::get<RequestError>(item).input.line, 7);
}

TEST(RequestLineTest, EmptyOrNullStopNeedsNoTokenizer) {
  EXPECT_TRUE(ok(parse(R"({"prompt_token_ids": [1], "stop": null})")).stop.empty());
  EXPECT_TRUE(ok(parse(R"({"prompt_token_ids": [1], "stop": []})")).stop.empty());
}

std::shared_ptr<const Tokenizer> tiny_tokenizer() {
  static const auto tokenizer = Tokenizer::from_json(tiny_tokenizer_json(512), "tiny");
  return tokenizer;
}

RequestItem parse_with_tokenizer(std::string_view line, int64_t vocab = 512) {
  return parse_request_line(line, InputLocation{"in.jsonl", 7}, RequestParseOptions{.vocab_size = vocab, .tokenizer = tiny_tokenizer()});
}

TEST(RequestLineTest, TextPromptIsTokenizedWithTheTemplateByDefault) {
  const std::string text = "Hello world, the quick brown fox.";
  const auto with_bos = tiny_tokenizer()->encode(text, /*add_special_tokens=*/true);
  const auto without = tiny_tokenizer()->encode(text, /*add_special_tokens=*/false);
  ASSERT_EQ(with_bos.size(), without.size() + 1);
  ASSERT_EQ(with_bos.front(), kTinyBosId);

  const RequestLine r = ok(parse_with_tokenizer(R"({"id": "t", "prompt": ")" + text + R"("})"));
  EXPECT_EQ(r.prompt_token_ids, with_bos);
  ASSERT_TRUE(r.prompt_text.has_value());
  EXPECT_EQ(*r.prompt_text, text);
  EXPECT_TRUE(r.add_special_tokens);
  EXPECT_EQ(tiny_tokenizer()->decode(r.prompt_token_ids, /*skip_special_tokens=*/true), text);

  const RequestLine plain = ok(parse_with_tokenizer(R"({"prompt": ")" + text + R"(", "add_special_tokens": false})"));
  EXPECT_EQ(plain.prompt_token_ids, without);
  // Token-id prompts are taken as given: add_special_tokens does not apply to them.
  EXPECT_EQ(ok(parse_with_tokenizer(R"({"prompt_token_ids": [7, 8], "add_special_tokens": true})")).prompt_token_ids,
            (std::vector<int32_t>{7, 8}));
}

// A tokenizer.json without a post_processor template (post_processor null) adds nothing on
// add_special_tokens; then the checkpoint config's BOS is prepended, and never twice.
TEST(RequestLineTest, TemplateLessTokenizerGetsTheConfigBos) {
  std::string json = tiny_tokenizer_json(512);
  const std::size_t start = json.find("\"post_processor\":"), end = json.find("\"decoder\":");
  ASSERT_NE(start, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  json.replace(start, end - start, "\"post_processor\":null,\n");
  const auto bare = Tokenizer::from_json(json, "template-less");
  EXPECT_FALSE(bare->template_adds_tokens());
  EXPECT_TRUE(tiny_tokenizer()->template_adds_tokens());
  const std::string text = "the quick brown fox";
  const auto plain = bare->encode(text, /*add_special_tokens=*/true);
  ASSERT_EQ(plain, bare->encode(text, /*add_special_tokens=*/false));
  auto parse = [&](std::shared_ptr<const Tokenizer> tok, const std::string& line) {
    return ok(parse_request_line(line, InputLocation{"in.jsonl", 1},
                                 RequestParseOptions{.vocab_size = 512, .tokenizer = std::move(tok), .bos_token_id = kTinyBosId}));
  };
  std::vector<int32_t> with_bos{kTinyBosId};
  with_bos.insert(with_bos.end(), plain.begin(), plain.end());
  EXPECT_EQ(parse(bare, R"({"prompt": "the quick brown fox"})").prompt_token_ids, with_bos);
  EXPECT_EQ(parse(bare, R"({"prompt": "the quick brown fox", "add_special_tokens": false})").prompt_token_ids, plain);
  EXPECT_EQ(parse(tiny_tokenizer(), R"({"prompt": "the quick brown fox"})").prompt_token_ids,
            tiny_tokenizer()->encode(text, /*add_special_tokens=*/true));  // the template's BOS only
}

TEST(RequestLineTest, OpenAiBodyTextPromptAndStopStrings) {
  const RequestLine r = ok(parse_with_tokenizer(R"({"custom_id": "c", "url": "/v1/completions",
      "body": {"prompt": "caf\u00e9 au lait", "stop": ["\n\n", "lait"], "add_special_tokens": false}})"));
  EXPECT_EQ(r.prompt_token_ids, tiny_tokenizer()->encode("caf\xC3\xA9 au lait", /*add_special_tokens=*/false));
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n\n", "lait"}));
  EXPECT_EQ(ok(parse_with_tokenizer(R"({"prompt": "x", "stop": "end"})")).stop, (std::vector<std::string>{"end"}));
}

TEST(RequestLineTest, TextPromptOutsideTheModelVocabularyIsAnError) {
  // The tiny tokenizer's merges have ids >= 258; a model of 300 ids cannot take all of them.
  const std::string text = "the people of the town went out to the market";
  int32_t largest = 0;
  for (int32_t id : tiny_tokenizer()->encode(text, true)) largest = std::max(largest, id);
  ASSERT_GE(largest, 300);
  const std::string message = error_of(parse_with_tokenizer(R"({"prompt": ")" + text + R"("})", /*vocab=*/300));
  EXPECT_NE(message.find("in.jsonl:7: field 'prompt' encodes to token id"), std::string::npos) << message;
  EXPECT_NE(message.find("outside the model's vocabulary of 300"), std::string::npos) << message;
}

std::vector<RequestItem> read_all(const std::vector<std::string>& files, RequestReader::Options options = {}) {
  RequestReader reader(files, options);
  std::vector<RequestItem> items;
  RequestItem item;
  while (reader.next(&item)) items.push_back(item);
  return items;
}

TEST(RequestReaderTest, SkipsBlankLinesAndKeepsGoingAfterErrors) {
  testing::TempDir dir;
  const auto path = dir.write("a.jsonl",
                              "{\"id\": \"a\", \"prompt_token_ids\": [1]}\n"
                              "\n"
                              "   \t\n"
                              "{broken\n"
                              "{\"id\": \"b\", \"prompt_token_ids\": [2]}");  // no final newline
  const auto items = read_all({path});
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(std::get<RequestLine>(items[0]).id, "a");
  EXPECT_EQ(std::get<RequestError>(items[1]).input.line, 4);
  EXPECT_EQ(std::get<RequestLine>(items[2]).id, "b");
  EXPECT_EQ(std::get<RequestLine>(items[2]).input.line, 5);
}

TEST(RequestReaderTest, DuplicateIdsAcrossFilesAreErrors) {
  testing::TempDir dir;
  const auto a = dir.write("a.jsonl", "{\"id\": \"x\", \"prompt_token_ids\": [1]}\n");
  const auto b = dir.write("b.jsonl", "{\"id\": \"y\", \"prompt_token_ids\": [1]}\n{\"id\": \"x\", \"prompt_token_ids\": [2]}\n");
  const auto items = read_all({a, b});
  ASSERT_EQ(items.size(), 3u);
  EXPECT_TRUE(std::holds_alternative<RequestLine>(items[0]));
  EXPECT_TRUE(std::holds_alternative<RequestLine>(items[1]));
  const auto& error = std::get<RequestError>(items[2]);
  EXPECT_EQ(error.id, b + ":2") << "the error record's id is its line, so ids stay unique in the results";
  EXPECT_NE(error.message.find(b + ":2: duplicate id 'x' (first at " + a + ":1)"), std::string::npos) << error.message;
}

// Ids stay unique whatever the lines: a bad line's readable id counts as seen, and no line may
// take the FILE:LINE form that lines without an id (and error records) get, but its own.
TEST(RequestReaderTest, EveryRecordsIdIsUnique) {
  testing::TempDir dir;
  const auto g = dir.write("g.jsonl", "{\"prompt_token_ids\": [1]}\n{\"id\": \"x\", \"prompt_token_ids\": []}\nnot json\n");
  const auto h = dir.file("h.jsonl");
  dir.write("h.jsonl", "{\"id\": \"" + g + ":3\", \"prompt_token_ids\": [1]}\n{\"id\": \"x\", \"prompt_token_ids\": [2]}\n{\"id\": \"" + h +
                           ":3\", \"prompt_token_ids\": [3]}\n{\"id\": \"" + g + ":1\", \"prompt_token_ids\": [4]}\n");
  const auto items = read_all({g, h});
  ASSERT_EQ(items.size(), 7u);
  const auto id_of = [](const RequestItem& item) {
    return std::holds_alternative<RequestLine>(item) ? std::get<RequestLine>(item).id : std::get<RequestError>(item).id;
  };
  const std::vector<std::string> expected = {g + ":1", "x", g + ":3", h + ":1", h + ":2", h + ":3", h + ":4"};
  for (std::size_t i = 0; i < items.size(); ++i) EXPECT_EQ(id_of(items[i]), expected[i]) << i;
  EXPECT_TRUE(std::holds_alternative<RequestLine>(items[5])) << "a line may name itself";
  const auto message = [&](std::size_t i) { return std::get<RequestError>(items[i]).message; };
  EXPECT_NE(message(3).find(h + ":1: id '" + g + ":3' has the form FILE:LINE of an input line"), std::string::npos) << message(3);
  EXPECT_NE(message(4).find(h + ":2: duplicate id 'x' (first at " + g + ":2)"), std::string::npos) << message(4);
  EXPECT_NE(message(6).find("has the form FILE:LINE"), std::string::npos) << message(6);
}

TEST(RequestReaderTest, OverlongLineIsAnErrorAndTheNextLineIsRead) {
  testing::TempDir dir;
  std::string tokens(5000, '1');
  const auto path = dir.write("a.jsonl", "{\"prompt_token_ids\": [" + tokens + "]}\n{\"id\": \"after\", \"prompt_token_ids\": [1]}\n");
  RequestReader::Options options;
  options.max_line_bytes = 1000;
  options.parse.vocab_size = 0;
  const auto items = read_all({path}, options);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_NE(std::get<RequestError>(items[0]).message.find("line longer than 1000 bytes"), std::string::npos);
  EXPECT_EQ(std::get<RequestLine>(items[1]).id, "after");
}

TEST(RequestReaderTest, LinesAcrossReadBuffersAndManyLines) {
  testing::TempDir dir;
  std::string text;
  for (int i = 0; i < 30000; ++i)
    text += "{\"id\": \"r" + std::to_string(i) + "\", \"prompt_token_ids\": [" + std::to_string(i % 500) + ", 1, 2, 3]}\n";
  const auto path = dir.write("many.jsonl", text);
  RequestReader reader({path}, {});
  RequestItem item;
  int64_t count = 0;
  while (reader.next(&item)) {
    const auto& r = std::get<RequestLine>(item);
    ASSERT_EQ(r.id, "r" + std::to_string(count));
    ASSERT_EQ(r.prompt_token_ids.front(), count % 500);
    ++count;
  }
  EXPECT_EQ(count, 30000);
}

TEST(RequestReaderTest, CountsTheBytesOfTheLinesReadAgainstTheInputsTotal) {
  testing::TempDir dir;
  const std::string first = "{\"id\": \"a\", \"prompt_token_ids\": [1]}\n";
  const std::string blank = "\n  \n";
  const std::string second = "{\"id\": \"b\", \"prompt_token_ids\": [2]}";  // no final newline
  const std::string third = "{broken\n";
  const auto a = dir.write("a.jsonl", first + blank + second);
  const auto b = dir.write("b.jsonl", third);
  RequestReader reader({a, b}, {});
  const auto total = static_cast<int64_t>(first.size() + blank.size() + second.size() + third.size());
  EXPECT_EQ(reader.total_bytes(), total);
  EXPECT_EQ(reader.bytes_read(), 0);
  RequestItem item;
  ASSERT_TRUE(reader.next(&item));
  EXPECT_EQ(reader.bytes_read(), static_cast<int64_t>(first.size()));
  ASSERT_TRUE(reader.next(&item));  // the blank lines before it count too
  EXPECT_EQ(reader.bytes_read(), static_cast<int64_t>(first.size() + blank.size() + second.size()));
  ASSERT_TRUE(reader.next(&item));
  EXPECT_FALSE(reader.next(&item));
  EXPECT_EQ(reader.bytes_read(), total);
  // Not a regular file (a pipe, a device): refused, as the job reads its inputs twice.
  EXPECT_THROW(RequestReader({a, "/dev/null"}, {}), std::invalid_argument);
}

TEST(RequestReaderTest, MissingFileOrDirectoryIsRefusedAtConstructionNamingIt) {
  testing::TempDir dir;
  const auto good = dir.write("a.jsonl", "{\"prompt_token_ids\": [1]}\n");
  for (const std::string& bad : {std::string("/nonexistent/in.jsonl"), dir.path()}) {
    try {
      RequestReader reader({good, bad}, {});
      FAIL() << "expected an exception for " << bad;
    } catch (const std::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find(bad), std::string::npos) << error.what();
    }
  }
}

TEST(RequestLineTest, ChatLinesAreRenderedInTheDeepSeekFormatAndTokenized) {
  const auto chat = [](const std::string& body) {
    return R"({"custom_id": "c", "method": "POST", "url": "/v1/chat/completions", "body": )" + body + "}";
  };
  const RequestLine plain = ok(parse_with_tokenizer(chat(
      R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "hi"}]}], "max_completion_tokens": 9})")));
  EXPECT_EQ(plain.api, kApiChat);
  EXPECT_EQ(plain.max_tokens, 9);
  ASSERT_TRUE(plain.prompt_text.has_value());
  EXPECT_EQ(*plain.prompt_text, "<｜begin▁of▁sentence｜>Be brief.<｜User｜>hi<｜Assistant｜></think>");
  EXPECT_EQ(plain.prompt_token_ids, tiny_tokenizer()->encode(*plain.prompt_text, /*add_special_tokens=*/false));
  EXPECT_EQ(plain.prompt_token_ids.front(), kTinyBosId) << "the rendered BOS is the tokenizer's special token, written once";
  EXPECT_FALSE(plain.logprobs.has_value());

  const RequestLine thinking = ok(parse_with_tokenizer(
      chat(R"({"messages": [{"role": "user", "content": "2+2?"}], "thinking": true, "logprobs": true, "top_logprobs": 3})")));
  EXPECT_EQ(thinking.api, kApiChatThinking);
  EXPECT_EQ(*thinking.prompt_text, "<｜begin▁of▁sentence｜><｜User｜>2+2?<｜Assistant｜><think>");
  EXPECT_EQ(thinking.logprobs, 3);
  EXPECT_EQ(ok(parse_with_tokenizer(R"({"custom_id": "c", "url": "/v1/completions", "body": {"prompt": "x"}})")).api, kApiCompletions);
  EXPECT_EQ(ok(parse_with_tokenizer(R"({"prompt": "x"})")).api, kApiNative);

  for (const auto& [body, expected] : std::vector<std::pair<std::string, std::string>>{
           {R"({"max_tokens": 3})", "missing 'messages'"},
           {R"({"messages": []})", "'messages' is empty"},
           {R"({"messages": [{"role": "tool", "content": "x"}]})", "role 'tool' is not system, user or assistant"},
           {R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]})",
            "the last message must be the user's"},
           {R"({"messages": [{"content": "x"}]})", "field 'messages[0]' has no 'role'"},
           {R"({"messages": [{"role": "user"}]})", "field 'messages[0]' (role 'user') has no 'content'"},
           {R"({"messages": [{"role": "user", "content": "x", "tool_calls": []}]})", "unknown field 'messages[0].tool_calls'"},
           {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", "not {\"type\": \"text\""},
           {R"({"messages": [{"role": "user", "content": "x"}], "prompt": "y"})", "'body.prompt' is not part of a chat request"},
           {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", "'top_logprobs' needs 'logprobs': true"}}) {
    const std::string message = error_of(parse_with_tokenizer(chat(body)));
    EXPECT_NE(message.find(expected), std::string::npos) << body << " -> " << message;
  }
  EXPECT_NE(error_of(parse(chat(R"({"messages": [{"role": "user", "content": "x"}]})"))).find("text prompts need the tokenizer"),
            std::string::npos);
}

}  // namespace
}  // namespace deepinfer::io
