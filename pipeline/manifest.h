#pragma once
// Fingerprints and the end-of-job files: manifest.json (deterministic: the job fingerprint and
// a checksum of each results file's outcome) and summary.json (throughput; not compared).
// Owns: what goes into them. Does not own: running the job.

#include <string>
#include <vector>

#include "pipeline/job_stats.h"

namespace deepinfer::pipeline {

std::string sha256_of_file(const std::string& path);

// {"files":[{"name","bytes","sha256"}...],"mode":"full"|"sampled"} for a checkpoint folder:
// every file hashed whole, or (past 8 GiB in all) its size and 64 spread 1 MiB pieces.
std::string checkpoint_fingerprint(const std::string& dir);

// Writes OUT/manifest.json: {"format", "job": job_json, "results": [{"file", "records",
// "outcome_sha256"}]} where outcome_sha256 hashes each record without its step metrics.
void write_manifest(const std::string& out_dir, const std::string& job_json, int world_size);

// Writes OUT/summary.json from the ranks' outcomes (rank order); returns the vLLM-style line
// "Throughput: X requests/s, Y total tokens/s, Z output tokens/s".
std::string write_summary(const std::string& out_dir, const std::vector<JobOutcome>& ranks, const std::string& hardware);

}  // namespace deepinfer::pipeline
