#pragma once
// A file written as PATH.partial and made visible under PATH only by commit():
// flushed, fsynced, renamed, and the directory fsynced. A crash leaves either the old
// PATH (or none) and a .partial, never a half-written PATH.

#include <cstddef>
#include <string>

namespace deepinfer::io {

class DurableFile final {
 public:
  // truncate=false appends to an existing PATH.partial (used when resuming).
  explicit DurableFile(std::string path, bool truncate = true);
  ~DurableFile();  // closes; leaves PATH.partial behind if not committed
  DurableFile(const DurableFile&) = delete;
  DurableFile& operator=(const DurableFile&) = delete;

  void write(const void* data, std::size_t size);
  void sync();    // fsync what was written so far
  void commit();  // sync, close, rename to PATH, fsync the directory
  const std::string& path() const { return path_; }
  std::string partial_path() const { return path_ + ".partial"; }
  std::size_t bytes_written() const { return written_; }

 private:
  std::string path_;
  int fd_ = -1;
  std::size_t written_ = 0;
};

// Writes a whole small file durably (manifest, summary, config.json).
void write_file_atomically(const std::string& path, const std::string& contents);
std::string read_file(const std::string& path);  // throws naming the path

// Removes a file or a whole directory tree (POSIX nftw). Used instead of
// std::filesystem::remove_all: PyTorch wheels export their own copy of libstdc++'s
// std::filesystem symbols (pytorch/pytorch#133437), and a program linked with LibTorch then
// crashes inside remove_all. Returns false if something could not be removed.
bool remove_tree(const std::string& path);

}  // namespace deepinfer::io
