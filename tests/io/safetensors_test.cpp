#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "io/durable_file.h"
#include "tests/testing/temp_dir.h"

namespace deepinfer::io {
namespace {

std::string file_with_header(const std::string& header, const std::string& data) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xFF);
  return bytes + header + data;
}

void expect_open_error(const testing::TempDir& dir, const std::string& bytes, const std::string& expected) {
  const auto path = dir.write("bad.safetensors", bytes);
  try {
    SafetensorsFile::open(path);
    FAIL() << "expected an error containing: " << expected;
  } catch (const std::runtime_error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find(expected), std::string::npos) << message;
  }
}

TEST(SafetensorsTest, WriteThenReadEveryDType) {
  testing::TempDir dir;
  SafetensorsWriter writer;
  const float f32[3] = {1.5f, -2.0f, 3.25f};
  const int64_t i64[2] = {-7, 1LL << 40};
  const uint8_t u8[4] = {0, 1, 254, 255};
  writer.add("b.f32", DType::kF32, {3}, f32, sizeof(f32));
  writer.add("a.i64", DType::kI64, {2, 1}, i64, sizeof(i64));
  writer.add("c.fp8", DType::kF8E4M3, {2, 2}, u8, 4);
  writer.add("d.e8m0", DType::kF8E8M0, {4}, u8, 4);
  writer.add("e.bf16", DType::kBF16, {2}, u8, 4);
  writer.add("f.i8", DType::kI8, {4}, u8, 4);
  writer.add("g.empty", DType::kF16, {0, 5}, nullptr, 0);
  const auto path = dir.file("m.safetensors");
  writer.write(path);
  auto file = SafetensorsFile::open(path);
  ASSERT_EQ(file->tensors().size(), 7u);
  const TensorView* t = file->find("b.f32");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dtype, DType::kF32);
  EXPECT_EQ(t->shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(std::memcmp(t->data, f32, sizeof(f32)), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data) % 8, 0u) << "data section is 8-byte aligned";
  const TensorView* big = file->find("a.i64");
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(std::memcmp(big->data, i64, sizeof(i64)), 0);
  EXPECT_EQ(file->find("c.fp8")->dtype, DType::kF8E4M3);
  EXPECT_EQ(file->find("g.empty")->numel(), 0);
  EXPECT_EQ(file->find("missing"), nullptr);
}

TEST(SafetensorsTest, ShardedCheckpointThroughIndex) {
  testing::TempDir dir;
  const float one = 1.0f, two = 2.0f;
  SafetensorsWriter a, b;
  a.add("x", DType::kF32, {1}, &one, 4);
  b.add("y", DType::kF32, {1}, &two, 4);
  a.write(dir.file("model-00001-of-00002.safetensors"));
  b.write(dir.file("model-00002-of-00002.safetensors"));
  dir.write("model.safetensors.index.json",
            R"({"metadata": {}, "weight_map": {"x": "model-00001-of-00002.safetensors", "y": "model-00002-of-00002.safetensors"}})");
  const auto checkpoint = Checkpoint::open(dir.path());
  EXPECT_EQ(checkpoint.names(), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(*reinterpret_cast<const float*>(checkpoint.find("y")->data), 2.0f);
  EXPECT_NE(checkpoint.file_of("y").find("00002"), std::string::npos);
}

TEST(SafetensorsTest, DuplicateTensorAcrossShardsIsAnError) {
  testing::TempDir dir;
  const float one = 1.0f;
  SafetensorsWriter a;
  a.add("x", DType::kF32, {1}, &one, 4);
  a.write(dir.file("a.safetensors"));
  a.write(dir.file("b.safetensors"));
  EXPECT_THROW(Checkpoint::open(dir.path()), std::runtime_error);
}

TEST(SafetensorsTest, CorruptAndTruncatedFilesAreClearErrors) {
  testing::TempDir dir;
  const std::string good_header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  expect_open_error(dir, "abc", "too short");
  expect_open_error(dir, std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8) + "{}", "exceeds the file");
  expect_open_error(dir, file_with_header(good_header, std::string(4, '\0')), "truncated");
  expect_open_error(dir, file_with_header("{not json", ""), "not valid JSON");
  expect_open_error(dir, file_with_header("[1]", ""), "not a JSON object");
  expect_open_error(dir, file_with_header(R"({"w":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})", "x"), "unsupported dtype 'Q4'");
  expect_open_error(dir, file_with_header(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(12, '\0')),
                    "8 bytes for shape of 12 bytes");
  expect_open_error(dir, file_with_header(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,8]}})", std::string(8, '\0')),
                    "non-negative");
  expect_open_error(dir, file_with_header(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", std::string(8, '\0')),
                    "begin <= end");
  expect_open_error(
      dir,
      file_with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                       std::string(12, '\0')),
      "overlap");
  expect_open_error(dir, file_with_header(R"({"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}})", ""),
                    "overflows");
  expect_open_error(dir, file_with_header(R"({"w":{"shape":[2],"data_offsets":[0,8]}})", std::string(8, '\0')), "dtype");
}

TEST(SafetensorsTest, WriterRejectsSizeMismatchAndDuplicates) {
  SafetensorsWriter writer;
  const float v[2] = {0, 0};
  EXPECT_THROW(writer.add("x", DType::kF32, {3}, v, sizeof(v)), std::invalid_argument);
  writer.add("x", DType::kF32, {2}, v, sizeof(v));
  EXPECT_THROW(writer.add("x", DType::kF32, {2}, v, sizeof(v)), std::invalid_argument);
}

}  // namespace
}  // namespace deepinfer::io
