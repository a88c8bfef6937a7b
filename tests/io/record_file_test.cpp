#include "io/record_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "io/durable_file.h"
#include "tests/testing/temp_dir.h"

namespace deepinfer::io {
namespace {

std::vector<std::string> make_records(int n) {
  std::vector<std::string> records;
  for (int i = 0; i < n; ++i) records.push_back("{\"id\":\"r" + std::to_string(i) + "\",\"tokens\":[" + std::to_string(i * 7) + "]}");
  return records;
}

std::string write_records(const testing::TempDir& dir, const std::string& name, const std::vector<std::string>& records,
                          std::size_t per_frame) {
  const std::string path = dir.file(name);
  RecordWriter writer(path, {.level = 3, .records_per_frame = per_frame});
  for (const auto& r : records) writer.append(r);
  writer.close();
  return path;
}

TEST(RecordFileTest, RoundTripAndPartialIsRenamed) {
  testing::TempDir dir;
  const auto records = make_records(100);
  const std::string path = dir.file("out.jsonl.zst");
  RecordWriter writer(path, {.level = 3, .records_per_frame = 8});
  for (const auto& r : records) writer.append(r);
  EXPECT_TRUE(std::filesystem::exists(path + ".partial"));
  EXPECT_FALSE(std::filesystem::exists(path));
  writer.close();
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
  EXPECT_EQ(read_all_records(path), records);
}

TEST(RecordFileTest, AFileWithoutRecordsHoldsAnEmptyFrame) {
  testing::TempDir dir;
  const RecordWriter::Options options{.level = 3, .records_per_frame = 8};
  const std::string path = write_records(dir, "empty.jsonl.zst", {}, 8);
  EXPECT_GT(std::filesystem::file_size(path), 0u) << "a zero-byte file is not a zstd stream (zstd -dc fails on it)";
  EXPECT_TRUE(read_all_records(path).empty());
  // Resumed from a .partial of zero bytes (killed before its first frame): the same file.
  RecordWriter(dir.file("r.jsonl.zst"), options).flush();
  RecordWriter::resume(dir.file("r.jsonl.zst"), 0, options)->close();
  EXPECT_EQ(read_file(dir.file("r.jsonl.zst")), read_file(path));
  // Resumed after records: nothing more is added at the close.
  const std::string full = write_records(dir, "full.jsonl.zst", make_records(3), 8);
  RecordWriter first(dir.file("f.jsonl.zst"), options);
  for (const auto& r : make_records(3)) first.append(r);
  first.flush();
  const auto valid = std::filesystem::file_size(dir.file("f.jsonl.zst.partial"));
  RecordWriter::resume(dir.file("f.jsonl.zst"), valid, options)->close();
  EXPECT_EQ(read_file(dir.file("f.jsonl.zst")), read_file(full));
}

TEST(RecordFileTest, SameRecordsGiveSameBytes) {
  testing::TempDir dir;
  const auto records = make_records(50);
  const auto a = write_records(dir, "a.zst", records, 10);
  const auto b = write_records(dir, "b.zst", records, 10);
  EXPECT_EQ(read_file(a), read_file(b));
}

TEST(RecordFileTest, RecoversEveryCompleteFrameOfATruncatedFile) {
  testing::TempDir dir;
  const auto records = make_records(40);
  const auto path = write_records(dir, "t.zst", records, 10);  // 4 frames
  const std::string bytes = read_file(path);
  for (std::size_t cut : {bytes.size() - 1, bytes.size() / 2 + 1, std::size_t{5}, std::size_t{0}}) {
    const auto cut_path = dir.write("cut.zst", bytes.substr(0, cut));
    RecordReader reader(cut_path, /*recover=*/true);
    std::vector<std::string> got;
    std::string record;
    while (reader.next(&record)) got.push_back(record);
    EXPECT_EQ(got.size() % 10, 0u) << "cut " << cut;
    EXPECT_LT(got.size(), 40u);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), records.begin()));
    EXPECT_EQ(reader.truncated(), cut != 0) << reader.problem();
    // Strict reading of the same file fails naming it.
    if (cut != 0) {
      try {
        read_all_records(cut_path);
        FAIL() << "strict read of a truncated file must throw";
      } catch (const std::runtime_error& error) {
        EXPECT_NE(std::string(error.what()).find("cut.zst"), std::string::npos);
      }
    }
  }
}

TEST(RecordFileTest, CorruptFrameIsDetectedByChecksum) {
  testing::TempDir dir;
  const auto path = write_records(dir, "c.zst", make_records(30), 10);
  std::string bytes = read_file(path);
  bytes[bytes.size() - 6] ^= 0x5A;  // inside the last frame
  const auto bad = dir.write("bad.zst", bytes);
  RecordReader reader(bad, /*recover=*/true);
  std::string record;
  int count = 0;
  while (reader.next(&record)) ++count;
  EXPECT_EQ(count, 20);
  EXPECT_TRUE(reader.truncated());
  EXPECT_THROW(read_all_records(bad), std::runtime_error);
}

TEST(RecordFileTest, ResumeContinuesAfterTheValidPrefix) {
  testing::TempDir dir;
  const auto records = make_records(35);
  const std::string path = dir.file("r.zst");
  {
    RecordWriter writer(path, {.level = 3, .records_per_frame = 10});
    for (int i = 0; i < 25; ++i) writer.append(records[i]);  // 2 frames flushed, 5 pending: lost on "crash"
  }
  // Simulate a torn write after the last complete frame.
  { std::ofstream(path + ".partial", std::ios::app | std::ios::binary) << "\x28\xb5\x2f"; }
  RecordReader reader(path + ".partial", /*recover=*/true);
  std::string record;
  std::size_t kept = 0;
  while (reader.next(&record)) ++kept;
  ASSERT_EQ(kept, 20u);
  auto writer = RecordWriter::resume(path, reader.valid_bytes(), {.level = 3, .records_per_frame = 10});
  for (std::size_t i = kept; i < records.size(); ++i) writer->append(records[i]);
  writer->close();
  EXPECT_EQ(read_all_records(path), records);
}

// The reader holds about one frame, not the file: frames that straddle its 1 MiB reads and a
// frame larger than one read come back whole, and a cut-off last frame still ends recovery.
TEST(RecordFileTest, StreamsFramesAcrossReadsOfTheFile) {
  testing::TempDir dir;
  std::mt19937 rng(4);
  std::vector<std::string> records;
  for (int i = 0; i < 3000; ++i) {
    std::string noise(700 + rng() % 600, 'x');
    for (char& c : noise) c = static_cast<char>('a' + rng() % 26);  // barely compressible
    records.push_back("{\"id\":\"r" + std::to_string(i) + "\",\"noise\":\"" + noise + "\"}");
  }
  const std::string path = write_records(dir, "big.jsonl.zst", records, /*per_frame=*/97);
  std::vector<std::string> huge_frame(records.begin(), records.begin() + 2000);  // ~2 MB in one frame
  const std::string huge = write_records(dir, "huge.jsonl.zst", huge_frame, /*per_frame=*/5000);
  ASSERT_GT(std::filesystem::file_size(path), std::size_t{1} << 20);
  ASSERT_GT(std::filesystem::file_size(huge), std::size_t{1} << 20) << "one frame larger than a read";
  EXPECT_EQ(read_all_records(path), records);
  EXPECT_EQ(read_all_records(huge), huge_frame);
  const auto size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, size - 100);
  RecordReader reader(path, /*recover=*/true);
  std::string record;
  std::size_t n = 0;
  while (reader.next(&record)) EXPECT_EQ(record, records[n++]);
  EXPECT_TRUE(reader.truncated());
  EXPECT_EQ(n, records.size() - records.size() % 97) << "every complete frame, not the cut last one (3000 % 97 = 90 records)";
  EXPECT_LT(reader.valid_bytes(), size - 100);
}

TEST(RecordFileTest, RejectsNewlineInRecord) {
  testing::TempDir dir;
  RecordWriter writer(dir.file("n.zst"), {});
  EXPECT_THROW(writer.append("{\"a\":\n1}"), std::invalid_argument);
}

}  // namespace
}  // namespace deepinfer::io
