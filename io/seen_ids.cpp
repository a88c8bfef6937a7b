#include "io/seen_ids.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "io/sha256.h"

namespace deepinfer::io {
namespace {

constexpr int kBloomProbes = 4;
constexpr int64_t kMaxLine = (int64_t{1} << 40) - 1;

uint64_t hex_word(std::string_view hex) {
  uint64_t word = 0;
  std::from_chars(hex.data(), hex.data() + hex.size(), word, 16);
  return word;
}

// An unnamed file in `dir`: it disappears with its descriptor.
int open_spill_file(const std::string& dir) {
  const std::string where = dir.empty() ? std::filesystem::temp_directory_path().string() : dir;
  int fd = ::open(where.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
  std::string pattern = where + "/deepinfer-ids-XXXXXX";  // file systems without O_TMPFILE
  fd = ::mkstemp(pattern.data());
  if (fd < 0) throw std::runtime_error("duplicate-id spill file in " + where + ": " + std::strerror(errno));
  ::unlink(pattern.c_str());
  return fd;
}

}  // namespace

SeenIds::SeenIds(Options options) : options_(std::move(options)), bloom_(std::max<std::size_t>(options_.bloom_bytes / 8, 1), 0) {
  for (auto& bucket : buckets_) {
    bucket.fd = open_spill_file(options_.spill_dir);
    bucket.buffer.reserve(kBufferEntries);
  }
}

SeenIds::~SeenIds() {
  for (auto& bucket : buckets_)
    if (bucket.fd >= 0) ::close(bucket.fd);
}

std::optional<SeenIds::Location> SeenIds::insert(std::string_view id, Location where) {
  const std::string digest = sha256_hex(id);
  Entry entry{hex_word(std::string_view(digest).substr(0, 16)), hex_word(std::string_view(digest).substr(16, 16)),
              uint64_t{where.file} << 40 | static_cast<uint64_t>(std::min(where.line, kMaxLine))};
  if (maybe_seen(entry)) {
    if (auto first = find(buckets_[entry.hi % kBuckets], entry))
      return Location{static_cast<uint32_t>(first->location >> 40), static_cast<int64_t>(first->location & kMaxLine)};
  }
  remember(entry);
  return std::nullopt;
}

// The filter's i-th bit for a fingerprint (double hashing).
uint64_t SeenIds::probe(const Entry& entry, int i) const {
  return (entry.hi + static_cast<uint64_t>(i) * (entry.lo | 1)) % (bloom_.size() * 64);
}

bool SeenIds::maybe_seen(const Entry& entry) const {
  for (int i = 0; i < kBloomProbes; ++i) {
    const uint64_t bit = probe(entry, i);
    if (!(bloom_[bit / 64] >> (bit % 64) & 1)) return false;
  }
  return true;
}

void SeenIds::remember(const Entry& entry) {
  for (int i = 0; i < kBloomProbes; ++i) {
    const uint64_t bit = probe(entry, i);
    bloom_[bit / 64] |= uint64_t{1} << (bit % 64);
  }
  Bucket& bucket = buckets_[entry.hi % kBuckets];
  bucket.buffer.push_back(entry);
  if (bucket.buffer.size() == kBufferEntries) write_out(bucket);
  ++size_;
}

// The bucket's entry with the same fingerprint: the buffer, then the file in 4 KiB reads.
std::optional<SeenIds::Entry> SeenIds::find(Bucket& bucket, const Entry& entry) {
  for (const Entry& e : bucket.buffer)
    if (e.hi == entry.hi && e.lo == entry.lo) return e;
  ++disk_reads_;
  std::vector<Entry> chunk(kBufferEntries);
  for (uint64_t done = 0; done < bucket.entries_on_disk;) {
    const uint64_t n = std::min<uint64_t>(chunk.size(), bucket.entries_on_disk - done);
    const ssize_t got = ::pread(bucket.fd, chunk.data(), n * sizeof(Entry), static_cast<off_t>(done * sizeof(Entry)));
    if (got != static_cast<ssize_t>(n * sizeof(Entry)))
      throw std::runtime_error(std::string("cannot read the duplicate-id spill file: ") + (got < 0 ? std::strerror(errno) : "short read"));
    for (uint64_t i = 0; i < n; ++i)
      if (chunk[i].hi == entry.hi && chunk[i].lo == entry.lo) return chunk[i];
    done += n;
  }
  return std::nullopt;
}

void SeenIds::write_out(Bucket& bucket) {
  const std::size_t bytes = bucket.buffer.size() * sizeof(Entry);
  const ssize_t wrote = ::pwrite(bucket.fd, bucket.buffer.data(), bytes, static_cast<off_t>(bucket.entries_on_disk * sizeof(Entry)));
  if (wrote != static_cast<ssize_t>(bytes))
    throw std::runtime_error(std::string("cannot write the duplicate-id spill file: ") +
                             (wrote < 0 ? std::strerror(errno) : "short write"));
  bucket.entries_on_disk += bucket.buffer.size();
  bucket.buffer.clear();
}

}  // namespace deepinfer::io
