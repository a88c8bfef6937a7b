#pragma once
// The output directory of a job: file names, the job fingerprint that --resume checks, and
// the state a resumed rank continues from.
//   OUT/job.json                            the job's fingerprint (written first; resume compares it)
//   OUT/results-RRRRR-of-WWWWW.jsonl.zst   per rank, deterministic, in input order
//   OUT/waiting-RRRRR-of-WWWWW.jsonl.zst   while running: finished records not yet in a frame
//                                          of the results file (ordered_output.h); removed at the end
//   OUT/metrics-RRRRR.jsonl.zst            per-step timings
//   OUT/summary.json, OUT/manifest.json    rank 0, at the end
//   OUT/.lock-RRRRR                        per rank, flock-ed while a job runs there
// Owns: naming and the resume decision. Does not own: record contents.

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "io/record_file.h"

namespace deepinfer::pipeline {

std::string results_file_name(int rank, int world_size);  // results-00000-of-00001.jsonl.zst
std::string metrics_file_name(int rank);                  // metrics-00000.jsonl.zst
std::string waiting_file_name(int rank, int world_size);  // waiting-00000-of-00001.jsonl.zst

struct ResumeState {
  int64_t records_done = 0;                  // complete records already in this rank's results file
  bool results_complete = false;             // the results file was already renamed into place
  std::unique_ptr<io::RecordWriter> writer;  // continues the file (null if complete)
  // Records past records_done that a killed run had kept in its waiting file, by this rank's
  // input index (all >= records_done); --resume does not run them again.
  std::map<int64_t, std::string> finished_ahead;
};

// Prepares OUT for this rank. Fresh run: refuses a directory that already holds a job.json
// or results, then writes job.json (rank 0) and starts the results file. Resume: requires
// job.json equal to `job_json` (else throws naming the first differing field), then keeps
// every complete record of the results file and truncates the rest, and reads back the
// complete frames of the waiting file. Either way the rank first locks OUT/.lock-RRRRR for
// the rest of the process (a directory another running job holds is refused, naming it). A resume of a directory that a killed start left
// without job.json or results starts the job; results without job.json are refused.
// Takes this rank's lock of OUT (OUT/.lock-RRRRR, held for the rest of the process) if OUT
// exists; false when another running job holds it. Every rank of a job checks this before it
// makes any file (a job of more ranks than the running one would otherwise write beside it).
bool lock_output_dir(const std::string& out_dir, int rank);
[[noreturn]] void throw_output_in_use(const std::string& out_dir);  // std::invalid_argument naming OUT

// Throws std::invalid_argument naming OUT unless it is (or can be made as) a writable directory:
// not empty, not a file, not a dangling link, under a directory this process may write.
void check_output_dir(const std::string& out_dir);

// --resume: throws std::invalid_argument naming OUT/job.json where it is damaged or records
// another job than job_json (fields in `ignore` not compared: "model" before the model loads);
// nothing where OUT holds no job.json (open_results decides).
void check_resumed_job(const std::string& out_dir, const std::string& job_json, std::initializer_list<std::string_view> ignore = {});

ResumeState open_results(const std::string& out_dir, int rank, int world_size, const std::string& job_json, bool resume,
                         const io::RecordWriter::Options& writer_options);

}  // namespace deepinfer::pipeline
