// SHA-256, JSON writing and durable files.
#include <gtest/gtest.h>

#include <filesystem>

#include "io/durable_file.h"
#include "io/json_writer.h"
#include "io/sha256.h"
#include "tests/testing/temp_dir.h"

namespace deepinfer::io {
namespace {

TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 incremental;
  const std::string million(1000000, 'a');
  for (std::size_t i = 0; i < million.size(); i += 333) incremental.update(million.substr(i, 333));
  EXPECT_EQ(incremental.hex(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(JsonWriterTest, FixedKeyOrderAndEscaping) {
  JsonWriter w;
  w.begin_object().key("id").value("a\"b\\c\n\x01").key("n").value(int64_t{-3}).key("x").value(0.1).key("ok").value(true);
  w.key("ids").array(std::vector<int32_t>{1, 2}).key("none").null().key("nested").begin_object().end_object();
  w.key("inf").value(1.0 / 0.0).end_object();
  EXPECT_EQ(w.str(), R"({"id":"a\"b\\c\n\u0001","n":-3,"x":0.1,"ok":true,"ids":[1,2],"none":null,"nested":{},"inf":null})");
}

TEST(JsonWriterTest, InvalidUtf8BecomesReplacementCharacter) {
  EXPECT_EQ(json_escape("ok\xff"
                        "é"),
            "\"ok\xEF\xBF\xBD"
            "é\"");
  EXPECT_EQ(json_escape("\xC0\x80"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");  // overlong NUL
  EXPECT_EQ(json_escape("\xF0\x9F\x98\x80"), "\"\xF0\x9F\x98\x80\"");  // emoji kept
}

TEST(DurableFileTest, VisibleOnlyAfterCommit) {
  testing::TempDir dir;
  const std::string path = dir.file("x.json");
  {
    DurableFile file(path);
    file.write("abc", 3);
    EXPECT_FALSE(std::filesystem::exists(path));
  }
  EXPECT_TRUE(std::filesystem::exists(path + ".partial"));
  write_file_atomically(path, "{}");
  EXPECT_EQ(read_file(path), "{}");
  EXPECT_THROW(read_file(dir.file("absent")), std::runtime_error);
}

}  // namespace
}  // namespace deepinfer::io
