#include "io/durable_file.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace deepinfer::io {
namespace {

[[noreturn]] void fail(const std::string& path, const char* what) {
  throw std::runtime_error(std::string(what) + " " + path + ": " + std::strerror(errno));
}

void sync_directory_of(const std::string& path) {
  auto dir = std::filesystem::path(path).parent_path();
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

DurableFile::DurableFile(std::string path, bool truncate) : path_(std::move(path)) {
  const std::string partial = partial_path();
  fd_ = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (truncate ? O_TRUNC : O_APPEND), 0644);
  if (fd_ < 0) fail(partial, "cannot create");
  if (!truncate) {
    off_t end = ::lseek(fd_, 0, SEEK_END);
    written_ = end > 0 ? static_cast<std::size_t>(end) : 0;
  }
}

DurableFile::~DurableFile() {
  if (fd_ >= 0) ::close(fd_);
}

void DurableFile::write(const void* data, std::size_t size) {
  if (fd_ < 0) throw std::logic_error("DurableFile " + path_ + ": write after commit");
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd_, bytes, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(partial_path(), "cannot write");
    }
    bytes += n;
    size -= static_cast<std::size_t>(n);
    written_ += static_cast<std::size_t>(n);
  }
}

void DurableFile::sync() {
  if (fd_ >= 0 && ::fsync(fd_) != 0) fail(partial_path(), "cannot fsync");
}

void DurableFile::commit() {
  sync();
  if (::close(fd_) != 0) fail(partial_path(), "cannot close");
  fd_ = -1;
  if (std::rename(partial_path().c_str(), path_.c_str()) != 0) fail(path_, "cannot rename into");
  sync_directory_of(path_);
}

void write_file_atomically(const std::string& path, const std::string& contents) {
  DurableFile file(path);
  file.write(contents.data(), contents.size());
  file.commit();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw std::runtime_error("cannot read " + path);
  return buffer.str();
}

bool remove_tree(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT;
  const auto remove_one = [](const char* entry, const struct stat*, int, struct FTW*) -> int { return ::remove(entry); };
  return ::nftw(path.c_str(), remove_one, 16, FTW_DEPTH | FTW_PHYS) == 0;
}

}  // namespace deepinfer::io
