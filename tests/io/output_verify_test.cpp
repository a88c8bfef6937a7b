#include "io/output_verify.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "io/durable_file.h"
#include "io/record_file.h"
#include "tests/testing/temp_dir.h"

namespace deepinfer::io {
namespace {

void write_dir(const std::string& dir, const std::vector<std::string>& records, const std::string& manifest) {
  std::filesystem::create_directories(dir);
  RecordWriter writer(dir + "/results-00000-of-00001.jsonl.zst", {.level = 3, .records_per_frame = 2});
  for (const auto& r : records) writer.append(r);
  writer.close();
  write_file_atomically(dir + "/manifest.json", manifest);
  write_file_atomically(dir + "/summary.json", "{\"elapsed\": 1.0}");
}

const std::vector<std::string> kRecords = {R"({"id":"a","finish_reason":"stop","output_token_ids":[1,2]})",
                                           R"({"id":"b","finish_reason":"length","output_token_ids":[3]})",
                                           R"({"id":"c","finish_reason":"stop","output_token_ids":[4]})"};

TEST(OutputVerifyTest, IdenticalDirectoriesExitZeroEvenWithDifferentTimings) {
  testing::TempDir tmp;
  write_dir(tmp.file("a"), kRecords, R"({"x":1})");
  write_dir(tmp.file("b"), kRecords, R"({"x":1})");
  write_file_atomically(tmp.file("b") + "/summary.json", "{\"elapsed\": 2.0}");
  const auto report = verify_output_dirs(tmp.file("a"), tmp.file("b"));
  EXPECT_EQ(report.exit_code(), 0) << report.message;
  EXPECT_EQ(report.message, "identical: 3 records");
}

TEST(OutputVerifyTest, NamesTheFirstRequestAndFieldThatDiffer) {
  testing::TempDir tmp;
  auto changed = kRecords;
  changed[1] = R"({"id":"b","finish_reason":"stop","output_token_ids":[3]})";
  changed[2] = R"({"id":"c","finish_reason":"stop","output_token_ids":[5]})";
  write_dir(tmp.file("a"), kRecords, R"({"x":1})");
  write_dir(tmp.file("b"), changed, R"({"x":1})");
  const auto report = verify_output_dirs(tmp.file("a"), tmp.file("b"));
  EXPECT_EQ(report.exit_code(), 1);
  EXPECT_NE(report.message.find("request 'b'"), std::string::npos) << report.message;
  EXPECT_NE(report.message.find("field 'finish_reason': \"length\" vs \"stop\""), std::string::npos) << report.message;
}

TEST(OutputVerifyTest, MissingRecordsAndManifestDifferences) {
  testing::TempDir tmp;
  write_dir(tmp.file("a"), kRecords, R"({"x":1})");
  write_dir(tmp.file("b"), {kRecords[0], kRecords[1]}, R"({"x":1})");
  auto report = verify_output_dirs(tmp.file("a"), tmp.file("b"));
  EXPECT_EQ(report.exit_code(), 1);
  EXPECT_NE(report.message.find("request 'c'"), std::string::npos) << report.message;

  write_dir(tmp.file("c"), kRecords, R"({"x":2})");
  report = verify_output_dirs(tmp.file("a"), tmp.file("c"));
  EXPECT_EQ(report.exit_code(), 1);
  EXPECT_NE(report.message.find("manifest.json differs: field 'x': 1 vs 2"), std::string::npos) << report.message;
}

TEST(OutputVerifyTest, ALongManifestFieldShowsThePathAndThePartThatDiffers) {
  testing::TempDir tmp;
  const std::string hash_a(64, 'a');
  std::string hash_b = hash_a;
  hash_b[50] = 'f';
  auto manifest = [](const std::string& hash) {
    return R"({"format":"x","job":{"model":{"source":"checkpoint","files":[{"name":"config.json","sha256":")" + std::string(64, '0') +
           R"("}]},"inputs":[{"file":"in.jsonl","sha256":")" + hash + R"("}],"seed":7}})";
  };
  write_dir(tmp.file("a"), kRecords, manifest(hash_a));
  write_dir(tmp.file("b"), kRecords, manifest(hash_b));
  const auto report = verify_output_dirs(tmp.file("a"), tmp.file("b"));
  EXPECT_EQ(report.exit_code(), 1);
  EXPECT_NE(report.message.find("field 'job.inputs[0].sha256': "), std::string::npos) << report.message;
  EXPECT_NE(report.message.find("aaaaf"), std::string::npos) << "the differing character is shown: " << report.message;
  EXPECT_EQ(first_field_difference(R"({"a":[1,2]})", R"({"a":[1,2,3]})"), "field 'a': 2 vs 3 elements");
  EXPECT_EQ(first_field_difference(R"({"a":{"b":1}})", R"({"a":{"c":1}})"), "field 'a.b': 1 vs (absent)");
}

TEST(OutputVerifyTest, UnreadableInputExitsTwo) {
  testing::TempDir tmp;
  write_dir(tmp.file("a"), kRecords, R"({"x":1})");
  EXPECT_EQ(verify_output_dirs(tmp.file("a"), tmp.file("nope")).exit_code(), 2);
  std::filesystem::create_directories(tmp.file("empty"));
  EXPECT_EQ(verify_output_dirs(tmp.file("a"), tmp.file("empty")).exit_code(), 2);
  write_dir(tmp.file("d"), kRecords, R"({"x":1})");
  std::filesystem::resize_file(tmp.file("d") + "/results-00000-of-00001.jsonl.zst", 10);
  const auto report = verify_output_dirs(tmp.file("a"), tmp.file("d"));
  EXPECT_EQ(report.exit_code(), 2) << report.message;
  EXPECT_NE(report.message.find("results-00000-of-00001.jsonl.zst"), std::string::npos) << report.message;
  write_dir(tmp.file("m"), kRecords, "not json");
  const auto damaged = verify_output_dirs(tmp.file("a"), tmp.file("m"));
  EXPECT_EQ(damaged.exit_code(), 2) << damaged.message;
  EXPECT_NE(damaged.message.find("manifest.json is not a JSON object"), std::string::npos) << damaged.message;
}

}  // namespace
}  // namespace deepinfer::io

namespace deepinfer::io {
namespace {

TEST(OutputVerifyTest, StepMetricsDifferencesAreReportedNotFailed) {
  testing::TempDir tmp;
  write_dir(tmp.file("a"), {R"({"id":"a","finish_reason":"stop","steps":{"finish_step":3}})"}, "{}");
  write_dir(tmp.file("b"), {R"({"id":"a","finish_reason":"stop","steps":{"finish_step":9}})"}, "{}");
  const auto report = verify_output_dirs(tmp.file("a"), tmp.file("b"));
  EXPECT_EQ(report.exit_code(), 0) << report.message;
  EXPECT_EQ(report.schedule_differences, 1);
  EXPECT_NE(report.message.find("1 differ only in their step metrics"), std::string::npos) << report.message;
}

TEST(OutputVerifyTest, TextAndStopReasonArePartOfTheOutcome) {
  testing::TempDir tmp;
  const std::string a =
      R"({"id":"a","finish_reason":"stop","stop_reason":"x","output_token_ids":[1],"text":"ab","steps":{"finish_step":3}})";
  write_dir(tmp.file("a"), {a}, "{}");
  for (const std::string field : {R"("text":"ac")", R"("stop_reason":"y")"}) {
    std::string b = a;
    const std::string key = field.substr(0, field.find(':') + 1);
    const auto at = b.find(key);
    b.replace(at, b.find(',', at) - at, field);
    io::remove_tree(tmp.file("b"));
    write_dir(tmp.file("b"), {b}, "{}");
    const auto report = verify_output_dirs(tmp.file("a"), tmp.file("b"));
    EXPECT_EQ(report.exit_code(), 1) << field;
    EXPECT_NE(report.message.find("field '" + key.substr(1, key.size() - 3) + "'"), std::string::npos) << report.message;
  }
}

TEST(OutputVerifyTest, JsonWithoutField) {
  EXPECT_EQ(json_without_field(R"({"id": "a\"b", "steps": {"x": 1}, "n": [1, 2]})", "steps"), R"({"id":"a\"b","n":[1,2]})");
  EXPECT_EQ(json_without_field(R"({"steps": 1})", "steps"), "{}");
}

}  // namespace
}  // namespace deepinfer::io
