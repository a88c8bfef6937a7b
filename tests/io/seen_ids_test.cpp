// SeenIds: exact repeat detection with the ids kept on disk. A tiny Bloom filter makes almost
// every lookup a "maybe", so the disk search is what answers.
#include "io/seen_ids.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "tests/testing/temp_dir.h"

namespace deepinfer::io {
namespace {

void check_repeats(std::size_t bloom_bytes, int n) {
  testing::TempDir dir;
  SeenIds ids({.bloom_bytes = bloom_bytes, .spill_dir = dir.path()});
  for (int i = 0; i < n; ++i) {
    const auto first = ids.insert("id-" + std::to_string(i), {.file = static_cast<uint32_t>(i % 3), .line = i + 1});
    ASSERT_FALSE(first.has_value()) << "id-" << i << " is new";
  }
  EXPECT_EQ(ids.size(), static_cast<std::size_t>(n));
  std::mt19937 rng(3);
  for (int k = 0; k < 200; ++k) {
    const int i = static_cast<int>(rng() % n);
    const auto first = ids.insert("id-" + std::to_string(i), {.file = 9, .line = 1'000'000 + k});
    ASSERT_TRUE(first.has_value()) << "id-" << i << " repeats";
    EXPECT_EQ(first->file, static_cast<uint32_t>(i % 3));
    EXPECT_EQ(first->line, i + 1) << "the first location is kept, not the repeat's";
  }
  EXPECT_EQ(ids.size(), static_cast<std::size_t>(n)) << "repeats are not remembered again";
}

TEST(SeenIdsTest, RepeatsAreFoundOnDiskWhenTheFilterSaysMaybe) {
  check_repeats(/*bloom_bytes=*/64, 30'000);  // the filter is saturated: every lookup reads its bucket
}

TEST(SeenIdsTest, ALargeFilterAnswersNewIdsWithoutTheDisk) {
  testing::TempDir dir;
  SeenIds ids({.bloom_bytes = std::size_t{1} << 20, .spill_dir = dir.path()});
  for (int i = 0; i < 50'000; ++i) ASSERT_FALSE(ids.insert("x" + std::to_string(i), {.file = 0, .line = i + 1}).has_value());
  EXPECT_LT(ids.disk_reads(), 50u) << "false positives of a 1 MiB filter over 50,000 ids are rare";
  check_repeats(std::size_t{1} << 20, 20'000);
}

TEST(SeenIdsTest, EmptyAndBinaryIdsAreIdsLikeAnyOther) {
  testing::TempDir dir;
  SeenIds ids({.bloom_bytes = 1024, .spill_dir = dir.path()});
  EXPECT_FALSE(ids.insert(std::string("a\0b", 3), {.file = 0, .line = 1}));
  EXPECT_FALSE(ids.insert("a", {.file = 0, .line = 2}));
  EXPECT_EQ(ids.insert(std::string("a\0b", 3), {.file = 0, .line = 3})->line, 1);
}

}  // namespace
}  // namespace deepinfer::io
