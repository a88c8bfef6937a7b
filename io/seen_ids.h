#pragma once
// The request ids seen so far, in bounded memory, so that the reader reports a repeated id
// with where it was first seen however long the input. Each id is kept as a 128-bit fingerprint
// (the first half of its SHA-256) with its location, appended to one of kBuckets spill files
// (unnamed temporary files: the disk holds 24 bytes per line, memory holds none of it). A fixed
// Bloom filter answers "new" for almost every new id without touching the disk; only when it
// says "maybe seen" (a true repeat, or a false positive, rare while the input has fewer lines
// than a few million per 4 MiB of filter) is the id's bucket read back and searched.
// Exact up to a fingerprint collision (about 2^-128 per pair of distinct ids).
// Owns: the filter, the buckets and their files. Does not own: what a repeat means.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::io {

class SeenIds final {
 public:
  struct Options {
    std::size_t bloom_bytes = std::size_t{4} << 20;
    std::string spill_dir;  // where the unnamed spill files live; empty: the system's temp directory
  };
  // Where an id was first seen: the index of its input file and its 1-based line.
  struct Location {
    uint32_t file = 0;
    int64_t line = 0;
  };

  explicit SeenIds(Options options);
  ~SeenIds();
  SeenIds(const SeenIds&) = delete;
  SeenIds& operator=(const SeenIds&) = delete;

  // The first location of `id` if it was inserted before; else remembers it at `where` and
  // returns nothing. Throws std::runtime_error when a spill file cannot be written or read.
  std::optional<Location> insert(std::string_view id, Location where);

  std::size_t size() const { return size_; }
  std::size_t disk_reads() const { return disk_reads_; }  // buckets searched on disk (filter hits)

 private:
  static constexpr std::size_t kBuckets = 64;
  static constexpr std::size_t kBufferEntries = 170;  // ~4 KiB per bucket
  struct Entry {
    uint64_t hi = 0, lo = 0;  // the fingerprint
    uint64_t location = 0;    // file << 40 | line
  };
  struct Bucket {
    int fd = -1;
    uint64_t entries_on_disk = 0;
    std::vector<Entry> buffer;  // appended, written out when full
  };
  uint64_t probe(const Entry& entry, int i) const;
  bool maybe_seen(const Entry& entry) const;
  void remember(const Entry& entry);
  std::optional<Entry> find(Bucket& bucket, const Entry& entry);
  void write_out(Bucket& bucket);

  Options options_;
  std::vector<uint64_t> bloom_;
  std::array<Bucket, kBuckets> buckets_;
  std::size_t size_ = 0;
  std::size_t disk_reads_ = 0;
};

}  // namespace deepinfer::io
