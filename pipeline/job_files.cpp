#include "pipeline/job_files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <stdexcept>

#include <simdjson.h>

#include "io/durable_file.h"
#include "io/output_verify.h"
#include "pipeline/ordered_output.h"

namespace deepinfer::pipeline {
namespace fs = std::filesystem;

std::string results_file_name(int rank, int world_size) {
  char name[64];
  std::snprintf(name, sizeof(name), "results-%05d-of-%05d.jsonl.zst", rank, world_size);
  return name;
}

std::string metrics_file_name(int rank) {
  char name[64];
  std::snprintf(name, sizeof(name), "metrics-%05d.jsonl.zst", rank);
  return name;
}

std::string waiting_file_name(int rank, int world_size) { return "waiting" + results_file_name(rank, world_size).substr(7); }

namespace {

// The records of the waiting file that a resumed run still needs: index >= first. The file is
// replaced whole (ordered_output.h); a damaged one keeps its complete frames.
std::map<int64_t, std::string> read_finished_ahead(const std::string& path, int64_t first) {
  std::map<int64_t, std::string> ahead;
  if (!fs::exists(path)) return ahead;
  io::RecordReader reader(path, /*recover=*/true);
  std::string line, json;
  int64_t index = 0;
  while (reader.next(&line)) {
    if (!parse_waiting_line(line, &index, &json))
      throw std::runtime_error(path + ": record " + std::to_string(reader.records_read()) + " is not '<index> <record>'");
    if (index >= first) ahead[index] = json;
  }
  return ahead;
}

std::string in_use_message(const std::string& out_dir) {
  return "output directory " + out_dir + " is in use by another running job; wait for it to end, or choose another --output";
}

// Whether descriptor `fd` is the file at `path` now (not one removed since).
bool same_file(int fd, const std::string& path) {
  struct stat open_file {
  }, named{};
  return ::fstat(fd, &open_file) == 0 && ::stat(path.c_str(), &named) == 0 && open_file.st_dev == named.st_dev &&
         open_file.st_ino == named.st_ino;
}

// Holds OUT/.lock-RRRRR (flock) for the rest of the process, so that a second job cannot write
// into the directory of a running one; the kernel drops the lock when the process ends, by
// kill -9 too. Taken again by the same process (a resume in the same process) it is a no-op,
// unless the file was removed since. A filesystem without flock (some NFS or Lustre mounts)
// runs the job without the lock, with a warning.
bool try_lock_rank_directory(const fs::path& dir, int rank) {
  static std::mutex mutex;
  static std::map<std::string, int> held;  // lock file -> descriptor
  char name[32];
  std::snprintf(name, sizeof name, ".lock-%05d", rank);
  const std::string path = fs::weakly_canonical(dir / name).string();
  std::lock_guard<std::mutex> guard(mutex);
  if (const auto it = held.find(path); it != held.end()) {
    if (same_file(it->second, path)) return true;
    ::close(it->second);
    held.erase(it);
  }
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    ::close(fd);
    if (error == EWOULDBLOCK) return false;
    std::fprintf(stderr, "warning: cannot lock %s (%s): nothing keeps a second job out of this directory while this one runs\n",
                 path.c_str(), std::strerror(error));
    return true;
  }
  held.emplace(path, fd);
  return true;
}

void lock_rank_directory(const fs::path& dir, int rank) {
  if (!try_lock_rank_directory(dir, rank)) throw std::invalid_argument(in_use_message(dir.string()));
}

// This rank's results hold nothing yet: no file, or a .partial without a complete frame (a
// rank other than 0 starts its file without waiting for rank 0's job.json).
bool no_results(const std::string& results) {
  if (fs::exists(results)) return false;
  if (!fs::exists(results + ".partial")) return true;
  io::RecordReader reader(results + ".partial", /*recover=*/true);
  std::string record;
  return !reader.next(&record) && reader.valid_bytes() == 0;
}

}  // namespace

bool lock_output_dir(const std::string& out_dir, int rank) { return !fs::is_directory(out_dir) || try_lock_rank_directory(out_dir, rank); }

void throw_output_in_use(const std::string& out_dir) { throw std::invalid_argument(in_use_message(out_dir)); }

void check_output_dir(const std::string& out_dir) {
  if (out_dir.empty()) throw std::invalid_argument("--output is empty");
  std::error_code error;
  const fs::path dir(out_dir);
  if (fs::is_symlink(fs::symlink_status(dir, error)) && !fs::exists(dir, error))
    throw std::invalid_argument("--output " + out_dir + " is a symbolic link to a missing path");
  fs::path existing = dir;
  while (!existing.empty() && !fs::exists(existing, error)) existing = existing.parent_path();
  if (existing.empty()) existing = ".";
  if (!fs::is_directory(existing, error))
    throw std::invalid_argument(existing == dir ? "--output " + out_dir + " exists and is not a directory"
                                                : "--output " + out_dir + ": " + existing.string() + " is not a directory");
  if (::access(existing.c_str(), W_OK | X_OK) != 0)
    throw std::invalid_argument("--output " + out_dir + ": cannot write in " + existing.string() + ": " + std::strerror(errno));
}

void check_resumed_job(const std::string& out_dir, const std::string& job_json, std::initializer_list<std::string_view> ignore) {
  const fs::path job_path = fs::path(out_dir) / "job.json";
  std::error_code error;
  if (!fs::is_regular_file(job_path, error)) return;
  std::string previous = io::read_file(job_path.string());
  if (!previous.empty() && previous.back() == '\n') previous.pop_back();
  simdjson::dom::parser parser;
  simdjson::dom::object previous_object;
  if (const auto parse_error = parser.parse(previous).get(previous_object))
    throw std::invalid_argument("--resume: " + job_path.string() +
                                " is damaged (not a JSON object: " + simdjson::error_message(parse_error) +
                                "); this directory cannot be resumed: start the job with another --output");
  if (previous == job_json) return;
  const std::string difference = io::first_field_difference(previous, job_json, ignore);
  if (!difference.empty())
    throw std::invalid_argument("--resume: the job differs from the one in " + job_path.string() + ": " + difference + " (was vs now)");
}

ResumeState open_results(const std::string& out_dir, int rank, int world_size, const std::string& job_json, bool resume,
                         const io::RecordWriter::Options& writer_options) {
  const fs::path dir(out_dir);
  const fs::path job_path = dir / "job.json";
  const std::string results = (dir / results_file_name(rank, world_size)).string();
  ResumeState state;
  if (fs::is_directory(dir)) lock_rank_directory(dir, rank);  // before anything in it is looked at
  // A start killed before rank 0 recorded job.json kept nothing of the job (at most empty
  // results files of other ranks), so --resume starts it. Results without a job.json cannot be
  // checked.
  const bool nothing_recorded = fs::is_directory(dir) && !fs::exists(job_path) && no_results(results);
  if (resume && nothing_recorded) {
    std::fprintf(stderr, "--resume: %s holds no job.json (the first start stopped before it recorded the job); starting it\n",
                 out_dir.c_str());
    fs::remove(results + ".partial");  // empty, if there
    resume = false;
  }
  if (!resume) {
    // Only rank 0 looks at job.json: it writes it, possibly before another rank gets here.
    if ((rank == 0 && fs::exists(job_path)) || fs::exists(results) || fs::exists(results + ".partial"))
      throw std::invalid_argument("output directory " + out_dir +
                                  " already holds a job; pass --resume to continue it, or choose another --output");
    fs::create_directories(dir);
    lock_rank_directory(dir, rank);
    if (rank == 0) io::write_file_atomically(job_path.string(), job_json + "\n");
    state.writer = std::make_unique<io::RecordWriter>(results, writer_options);
    return state;
  }
  if (!fs::exists(job_path)) throw std::invalid_argument("--resume: " + out_dir + " has no job.json; start it without --resume");
  check_resumed_job(out_dir, job_json);
  if (fs::exists(results)) {
    io::RecordReader reader(results, /*recover=*/false);
    std::string record;
    while (reader.next(&record)) ++state.records_done;
    state.results_complete = true;
    return state;
  }
  if (!fs::exists(results + ".partial")) {
    state.writer = std::make_unique<io::RecordWriter>(results, writer_options);
    return state;
  }
  io::RecordReader reader(results + ".partial", /*recover=*/true);
  std::string record;
  while (reader.next(&record)) ++state.records_done;
  state.writer = io::RecordWriter::resume(results, reader.valid_bytes(), writer_options);
  state.finished_ahead = read_finished_ahead((dir / waiting_file_name(rank, world_size)).string(), state.records_done);
  return state;
}

}  // namespace deepinfer::pipeline
