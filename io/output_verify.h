#pragma once
// Compares the deterministic files of two output directories: every
// results-*.jsonl.zst (record by record, decompressed) and manifest.json. Timing files
// (metrics-*, summary.json) are not compared.
// Owns: the comparison and its report. Does not own: writing those files.

#include <cstdint>
#include <string>

namespace deepinfer::io {

struct VerifyReport {
  enum class Outcome { kIdentical, kDifferent, kUnreadable };
  Outcome outcome = Outcome::kIdentical;
  int64_t records = 0;   // records compared
  std::string message;   // "identical: N records", the first difference, or why unreadable
  int exit_code() const { return outcome == Outcome::kIdentical ? 0 : outcome == Outcome::kDifferent ? 1 : 2; }
};

VerifyReport verify_output_dirs(const std::string& dir_a, const std::string& dir_b);

// The first top-level field whose value differs between two JSON objects, as
// "field 'name': A vs B" (values shortened); empty if equal.
std::string first_field_difference(const std::string& json_a, const std::string& json_b);

}  // namespace deepinfer::io
