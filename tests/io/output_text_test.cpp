// OutputText: the incremental output text and its stop strings, on the generated tiny
// tokenizer. Expected values are computed from the tokenizer, never written down.
#include "io/output_text.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "io/tiny_tokenizer.h"
#include "io/utf8.h"

namespace deepinfer::io {
namespace {

std::shared_ptr<const Tokenizer> tiny() {
  static const auto tok = Tokenizer::from_json(tiny_tokenizer_json(512), "tiny");
  return tok;
}

// Pushes ids until a stop; returns how many were pushed when it stopped (-1: never). Tokens
// below min_tokens may not stop (the engine's rule, SamplingParams::may_stop_at).
int64_t push_all(OutputText& out, const std::vector<int32_t>& ids, int64_t min_tokens = 0) {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (out.push(ids[i], /*may_stop=*/static_cast<int64_t>(i) >= min_tokens)) return static_cast<int64_t>(i) + 1;
  }
  return -1;
}

// The text that the first n ids make complete, through an OutputText without stop strings.
std::string text_of_prefix(const std::vector<int32_t>& ids, std::size_t n) {
  OutputText out(tiny(), {});
  for (std::size_t i = 0; i < n; ++i) out.push(ids[i]);
  return out.text();
}

TEST(OutputText, WithoutStopEqualsFullDecodeSkippingSpecialTokens) {
  const std::string text = "Hello, world! The quick brown fox.";
  std::vector<int32_t> ids = tiny()->encode(text, /*add_special_tokens=*/true);
  ids.push_back(kTinyEosId);
  ids.push_back(600);  // outside the tokenizer's vocabulary (a model may have more ids): no text
  OutputText out(tiny(), {});
  EXPECT_EQ(push_all(out, ids), -1);
  EXPECT_EQ(out.num_tokens(), static_cast<int64_t>(ids.size()));
  EXPECT_EQ(out.finish(), text);
  EXPECT_FALSE(out.stopped());
}

TEST(OutputText, StopStringSplitAcrossTwoTokens) {
  const std::string text = "the people of the town went out to the market";
  const std::vector<int32_t> ids = tiny()->encode(text, /*add_special_tokens=*/false);
  // A boundary between two multi-byte tokens past the middle; the stop string is the last
  // two bytes of the one and the first two of the next.
  std::size_t k = ids.size() / 2;
  while (k + 1 < ids.size() && (tiny()->token_bytes(ids[k]).size() < 2 || tiny()->token_bytes(ids[k + 1]).size() < 2)) ++k;
  ASSERT_LT(k + 1, ids.size()) << "no two adjacent merged tokens";
  const std::string& left = tiny()->token_bytes(ids[k]);
  const std::string stop = left.substr(left.size() - 2) + tiny()->token_bytes(ids[k + 1]).substr(0, 2);
  const std::string before = text_of_prefix(ids, k + 1);
  const std::size_t first = (before + tiny()->token_bytes(ids[k + 1])).find(stop);
  ASSERT_EQ(before.find(stop), std::string::npos) << "'" << stop << "' must not be complete before token " << k + 1;

  OutputText out(tiny(), {.stop = {stop}});
  EXPECT_EQ(push_all(out, ids), static_cast<int64_t>(k) + 2);
  ASSERT_TRUE(out.stopped());
  EXPECT_EQ(out.stop_string(), stop);
  EXPECT_EQ(out.finish(), text.substr(0, first));
  EXPECT_FALSE(out.push(ids.back())) << "tokens after the stop are ignored";
}

TEST(OutputText, StopStringEndingInAMultiByteCharacterSplitAcrossTokens) {
  const std::string text = "caf\xC3\xA9 au lait";  // "café au lait"; é = C3 A9
  const std::vector<int32_t> ids = tiny()->encode(text, /*add_special_tokens=*/false);
  std::size_t lead = 0;  // the token that ends with the lead byte C3
  while (lead < ids.size() && tiny()->token_bytes(ids[lead]).back() != '\xC3') ++lead;
  ASSERT_LT(lead + 1, ids.size()) << "é is expected to be split across two byte tokens";
  EXPECT_EQ(text_of_prefix(ids, lead + 1), "caf") << "the lead byte is held back";

  for (const std::string stop : {"f\xC3\xA9", "\xC3\xA9"}) {  // "fé" spans a character boundary too
    OutputText out(tiny(), {.stop = {stop}});
    EXPECT_EQ(push_all(out, ids), static_cast<int64_t>(lead) + 2) << stop;
    EXPECT_EQ(out.finish(), text.substr(0, text.find(stop))) << stop;
  }
  // A stop string that shares only the lead byte never matches.
  OutputText other(tiny(), {.stop = {"\xC3\xA8"}});  // è
  EXPECT_EQ(push_all(other, ids), -1);
  EXPECT_EQ(other.finish(), text);
}

TEST(OutputText, StopStringsInsideTheFirstMinTokensDoNotCount) {
  const std::string text = "ab ab ab ab";
  const std::vector<int32_t> ids = tiny()->encode(text, /*add_special_tokens=*/false);
  std::size_t n = 0;  // tokens needed for the first "ab"
  while (text_of_prefix(ids, n).find("ab") == std::string::npos) ++n;
  OutputText early(tiny(), {.stop = {"ab"}});
  EXPECT_EQ(push_all(early, ids), static_cast<int64_t>(n));
  EXPECT_EQ(early.finish(), "");

  OutputText late(tiny(), {.stop = {"ab"}});
  const int64_t stopped_at = push_all(late, ids, /*min_tokens=*/static_cast<int64_t>(n));
  ASSERT_GT(stopped_at, static_cast<int64_t>(n));
  EXPECT_EQ(late.finish(), text.substr(0, text.find("ab", 1)));
}

TEST(OutputText, OneTokenCompletingTwoStopStringsCutsAtTheEarlierStart) {
  const std::vector<int32_t> ids = {2 + 'x', 2 + 'a', 2 + 'b', 2 + 'c', 2 + 'd'};
  OutputText out(tiny(), {.stop = {"cd", "bcd"}});
  EXPECT_EQ(push_all(out, ids), 5);
  EXPECT_EQ(out.stop_string(), "bcd");
  EXPECT_EQ(out.finish(), "xa");
  // Completed by an earlier token, the later-starting string wins.
  OutputText first(tiny(), {.stop = {"abcd", "bc"}});
  EXPECT_EQ(push_all(first, ids), 4);
  EXPECT_EQ(first.stop_string(), "bc");
  EXPECT_EQ(first.finish(), "xa");
}

TEST(OutputText, RejectsEmptyAndInvalidStopStrings) {
  EXPECT_THROW(OutputText(tiny(), {.stop = {""}}), std::invalid_argument);
  EXPECT_THROW(OutputText(tiny(), {.stop = {"\xA9"}}), std::invalid_argument);
  EXPECT_THROW(OutputText(nullptr, {}), std::invalid_argument);
}

// Random token streams (invalid UTF-8, special and unknown ids included) against a reference
// built from whole-prefix decodes: the stop is found at the first prefix whose complete text
// contains the stop string, and the text is cut at its first occurrence.
TEST(OutputText, MatchesWholePrefixReferenceOnRandomStreams) {
  std::mt19937 rng(20240607);
  int checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int32_t> ids(1 + rng() % 40);
    for (auto& id : ids) id = static_cast<int32_t>(rng() % 100 < 3 ? rng() % 2 : rng() % 100 < 2 ? 512 + rng() % 8 : rng() % 512);
    OutputText all(tiny(), {});
    for (int32_t id : ids) all.push(id);
    const std::string complete = all.text();
    std::string full = all.finish();
    std::vector<int32_t> known;
    for (int32_t id : ids)
      if (tiny()->contains(id)) known.push_back(id);
    EXPECT_EQ(full, to_valid_utf8(tiny()->decode(known, /*skip_special_tokens=*/true))) << "trial " << trial;
    if (complete.empty()) continue;
    // A stop string: 1-6 characters of the complete text, starting at a random character.
    std::vector<std::size_t> starts;
    for (std::size_t pos = 0; pos < complete.size(); pos += static_cast<std::size_t>(utf8_step(complete, pos))) starts.push_back(pos);
    const std::size_t first_char = rng() % starts.size();
    const std::size_t last_char = std::min(starts.size(), first_char + 1 + rng() % 6);
    const std::size_t end = last_char < starts.size() ? starts[last_char] : complete.size();
    const std::string stop = complete.substr(starts[first_char], end - starts[first_char]);

    std::size_t n = 1;
    while (text_of_prefix(ids, n).find(stop) == std::string::npos) ++n;
    OutputText out(tiny(), {.stop = {stop}});
    EXPECT_EQ(push_all(out, ids), static_cast<int64_t>(n)) << "trial " << trial;
    EXPECT_EQ(out.finish(), complete.substr(0, complete.find(stop))) << "trial " << trial;
    ++checked;
  }
  EXPECT_GT(checked, 250);
}

}  // namespace
}  // namespace deepinfer::io
