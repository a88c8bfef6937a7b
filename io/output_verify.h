#pragma once
// Compares the deterministic files of two output directories: every
// results-*.jsonl.zst (record by record, decompressed) and manifest.json. Timing files
// (metrics-*, summary.json) are not compared.
// Owns: the comparison and its report. Does not own: writing those files.

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace deepinfer::io {

struct VerifyReport {
  enum class Outcome { kIdentical, kDifferent, kUnreadable };
  Outcome outcome = Outcome::kIdentical;
  int64_t records = 0;               // records compared
  int64_t schedule_differences = 0;  // records equal but for kScheduleFields
  std::string message;               // "identical: N records", the first difference, or why unreadable
  int exit_code() const { return outcome == Outcome::kIdentical ? 0 : outcome == Outcome::kDifferent ? 1 : 2; }
};

VerifyReport verify_output_dirs(const std::string& dir_a, const std::string& dir_b);

// Result-record fields that describe the run's schedule rather than its outcome ("steps": a
// resumed run schedules differently). verify reports but does not fail on them, and the
// manifest's outcome checksum leaves them out.
inline constexpr const char* kScheduleFields[] = {"steps"};

// The first top-level field whose value differs between two JSON objects, as
// "field 'name': A vs B" (values shortened); empty if equal. Fields in `ignore` are skipped.
std::string first_field_difference(const std::string& json_a, const std::string& json_b,
                                   std::initializer_list<std::string_view> ignore = {});

// A JSON object's text without the given top-level field (other fields minified, in order).
std::string json_without_field(const std::string& json, std::string_view field);

}  // namespace deepinfer::io
