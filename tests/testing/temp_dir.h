#pragma once
// A fresh directory under the system temp dir, removed with its contents at scope exit.

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "io/durable_file.h"

namespace deepinfer::testing {

class TempDir final {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "deepinfer-test-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() { io::remove_tree(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return (std::filesystem::path(path_) / name).string(); }
  std::string write(const std::string& name, const std::string& contents) const {
    const std::string path = file(name);
    std::ofstream(path, std::ios::binary) << contents;
    return path;
  }

 private:
  std::string path_;
};

}  // namespace deepinfer::testing
