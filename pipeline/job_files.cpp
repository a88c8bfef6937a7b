#include "pipeline/job_files.h"

#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "io/durable_file.h"
#include "io/output_verify.h"

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

ResumeState open_results(const std::string& out_dir, int rank, int world_size, const std::string& job_json, bool resume,
                         const io::RecordWriter::Options& writer_options) {
  const fs::path dir(out_dir);
  const fs::path job_path = dir / "job.json";
  const std::string results = (dir / results_file_name(rank, world_size)).string();
  ResumeState state;
  if (!resume) {
    // Only rank 0 looks at job.json: it writes it, possibly before another rank gets here.
    if ((rank == 0 && fs::exists(job_path)) || fs::exists(results) || fs::exists(results + ".partial"))
      throw std::invalid_argument("output directory " + out_dir +
                                  " already holds a job; pass --resume to continue it, or choose another --output");
    fs::create_directories(dir);
    if (rank == 0) io::write_file_atomically(job_path.string(), job_json + "\n");
    state.writer = std::make_unique<io::RecordWriter>(results, writer_options);
    return state;
  }
  if (!fs::exists(job_path)) throw std::invalid_argument("--resume: " + out_dir + " has no job.json; start it without --resume");
  std::string previous = io::read_file(job_path.string());
  if (!previous.empty() && previous.back() == '\n') previous.pop_back();
  if (previous != job_json)
    throw std::invalid_argument("--resume: the job differs from the one in " + job_path.string() + ": " +
                                io::first_field_difference(previous, job_json) + " (was vs now)");
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
  return state;
}

}  // namespace deepinfer::pipeline
