#include "pipeline/manifest.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>

#include "io/durable_file.h"
#include "io/json_writer.h"
#include "io/output_verify.h"
#include "io/record_file.h"
#include "io/sha256.h"
#include "pipeline/job_files.h"

namespace deepinfer::pipeline {
namespace fs = std::filesystem;

std::string sha256_of_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  io::Sha256 hash;
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    hash.update(buffer.data(), static_cast<std::size_t>(in.gcount()));
  }
  return hash.hex();
}

std::string checkpoint_fingerprint(const std::string& dir) {
  std::vector<fs::path> files;
  uintmax_t total = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    const auto ext = entry.path().extension();
    if (ext != ".safetensors" && ext != ".json") continue;
    files.push_back(entry.path());
    total += entry.file_size();
  }
  std::sort(files.begin(), files.end());
  const bool sampled = total > (uintmax_t{8} << 30);
  io::JsonWriter w;
  w.begin_object().key("mode").value(sampled ? "sampled" : "full").key("files").begin_array();
  for (const auto& path : files) {
    const uintmax_t bytes = fs::file_size(path);
    std::string digest;
    if (!sampled || bytes < (uintmax_t{64} << 20)) {
      digest = sha256_of_file(path.string());
    } else {
      std::ifstream in(path, std::ios::binary);
      io::Sha256 hash;
      std::vector<char> buffer(1 << 20);
      for (int piece = 0; piece < 64; ++piece) {
        in.seekg(static_cast<std::streamoff>((bytes - buffer.size()) / 63 * piece));
        in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
        hash.update(buffer.data(), static_cast<std::size_t>(in.gcount()));
      }
      digest = hash.hex();
    }
    w.begin_object().key("name").value(path.filename().string()).key("bytes").value(static_cast<uint64_t>(bytes));
    w.key("sha256").value(digest).end_object();
  }
  w.end_array().end_object();
  return w.take();
}

void write_manifest(const std::string& out_dir, const std::string& job_json, int world_size) {
  io::JsonWriter w;
  w.begin_object().key("format").value("deepinfer-results-1").key("job").raw(job_json).key("results").begin_array();
  for (int rank = 0; rank < world_size; ++rank) {
    const std::string name = results_file_name(rank, world_size);
    io::RecordReader reader((fs::path(out_dir) / name).string(), /*recover=*/false);
    io::Sha256 hash;
    std::string record;
    int64_t records = 0;
    while (reader.next(&record)) {
      hash.update(io::json_without_field(record, io::kScheduleFields[0]));
      hash.update("\n", 1);
      ++records;
    }
    w.begin_object().key("file").value(name).key("records").value(records).key("outcome_sha256").value(hash.hex()).end_object();
  }
  w.end_array().end_object();
  io::write_file_atomically((fs::path(out_dir) / "manifest.json").string(), w.str() + "\n");
}

std::string write_summary(const std::string& out_dir, const std::vector<JobOutcome>& ranks, const std::string& hardware) {
  JobOutcome total;
  double ttft_weighted = 0, tpot_weighted = 0;
  std::map<std::string, int64_t> reasons;
  for (const auto& r : ranks) {
    total.records += r.records;
    total.requests_run += r.requests_run;
    total.prompt_tokens += r.prompt_tokens;
    total.output_tokens += r.output_tokens;
    total.steps = std::max(total.steps, r.steps);
    total.preemptions += r.preemptions;
    total.elapsed_s = std::max(total.elapsed_s, r.elapsed_s);
    ttft_weighted += r.mean_ttft_ms * r.requests_run;
    tpot_weighted += r.mean_tpot_ms * r.requests_run;
    for (const auto& entry : r.finish_reasons) {
      const auto eq = entry.find('=');
      reasons[entry.substr(0, eq)] += std::stoll(entry.substr(eq + 1));
    }
  }
  const double seconds = std::max(total.elapsed_s, 1e-9);
  const double runs = std::max<double>(total.requests_run, 1);
  io::JsonWriter w;
  w.begin_object().key("hardware").value(hardware).key("ranks").value(static_cast<int64_t>(ranks.size()));
  w.key("elapsed_s").value(total.elapsed_s).key("requests").value(total.requests_run).key("records").value(total.records);
  w.key("requests_per_s").value(total.requests_run / seconds);
  w.key("input_tokens").value(total.prompt_tokens).key("output_tokens").value(total.output_tokens);
  w.key("input_tokens_per_s").value(total.prompt_tokens / seconds).key("output_tokens_per_s").value(total.output_tokens / seconds);
  w.key("total_tokens_per_s").value((total.prompt_tokens + total.output_tokens) / seconds);
  w.key("mean_ttft_ms").value(ttft_weighted / runs).key("mean_tpot_ms").value(tpot_weighted / runs);
  w.key("steps").value(total.steps).key("preemptions").value(total.preemptions);
  w.key("finish_reasons").begin_object();
  for (const auto& [reason, count] : reasons) w.key(reason).value(count);
  w.end_object().end_object();
  io::write_file_atomically((fs::path(out_dir) / "summary.json").string(), w.str() + "\n");
  char line[256];
  std::snprintf(line, sizeof(line), "Throughput: %.2f requests/s, %.2f total tokens/s, %.2f output tokens/s", total.requests_run / seconds,
                (total.prompt_tokens + total.output_tokens) / seconds, total.output_tokens / seconds);
  return line;
}

}  // namespace deepinfer::pipeline
