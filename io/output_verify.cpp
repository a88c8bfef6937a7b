#include "io/output_verify.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <vector>

#include <simdjson.h>

#include "io/durable_file.h"
#include "io/json_writer.h"
#include "io/record_file.h"

namespace deepinfer::io {
namespace {

namespace fs = std::filesystem;

std::string shorten(std::string text) { return text.size() > 80 ? text.substr(0, 77) + "..." : text; }

// The deterministic files of an output directory, sorted by name.
std::vector<std::string> deterministic_files(const std::string& dir) {
  if (!fs::is_directory(dir)) throw std::runtime_error(dir + " is not a directory");
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    const bool results = name.rfind("results-", 0) == 0 && name.size() > 10 && name.substr(name.size() - 10) == ".jsonl.zst";
    if (results || name == "manifest.json") names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) throw std::runtime_error(dir + " holds no results-*.jsonl.zst or manifest.json");
  return names;
}

std::string record_id(const std::string& json) {
  simdjson::dom::parser parser;
  std::string_view id;
  if (parser.parse(json).at_key("id").get(id)) return "?";
  return std::string(id);
}

}  // namespace

std::string json_without_field(const std::string& json, std::string_view field) {
  simdjson::dom::parser parser;
  simdjson::dom::object object;
  if (parser.parse(json).get(object)) throw std::runtime_error("not a JSON object: " + shorten(json));
  std::string out = "{";
  for (auto member : object) {
    if (member.key == field) continue;
    if (out.size() > 1) out += ',';
    out += json_escape(member.key);
    out += ':';
    out += simdjson::minify(member.value);
  }
  return out + "}";
}

std::string first_field_difference(const std::string& json_a, const std::string& json_b, std::initializer_list<std::string_view> ignore) {
  if (json_a == json_b) return "";
  simdjson::dom::parser parser_a, parser_b;
  simdjson::dom::object a, b;
  if (parser_a.parse(json_a).get(a) || parser_b.parse(json_b).get(b)) return "record text: " + shorten(json_a) + " vs " + shorten(json_b);
  std::set<std::string> keys;
  std::vector<std::string> order;
  for (auto field : a)
    if (keys.insert(std::string(field.key)).second) order.emplace_back(field.key);
  for (auto field : b)
    if (keys.insert(std::string(field.key)).second) order.emplace_back(field.key);
  for (const auto& key : order) {
    if (std::find(ignore.begin(), ignore.end(), key) != ignore.end()) continue;
    simdjson::dom::element va, vb;
    const bool has_a = a[key].get(va) == simdjson::SUCCESS;
    const bool has_b = b[key].get(vb) == simdjson::SUCCESS;
    const std::string ta = has_a ? simdjson::minify(va) : "(absent)";
    const std::string tb = has_b ? simdjson::minify(vb) : "(absent)";
    if (ta != tb) return "field '" + key + "': " + shorten(ta) + " vs " + shorten(tb);
  }
  return ignore.size() ? "" : "key order or formatting";
}

VerifyReport verify_output_dirs(const std::string& dir_a, const std::string& dir_b) {
  VerifyReport report;
  std::vector<std::string> files_a, files_b;
  try {
    files_a = deterministic_files(dir_a);
    files_b = deterministic_files(dir_b);
  } catch (const std::exception& error) {
    report.outcome = VerifyReport::Outcome::kUnreadable;
    report.message = std::string("unreadable: ") + error.what();
    return report;
  }
  if (files_a != files_b) {
    report.outcome = VerifyReport::Outcome::kDifferent;
    std::vector<std::string> only;
    std::set_symmetric_difference(files_a.begin(), files_a.end(), files_b.begin(), files_b.end(), std::back_inserter(only));
    report.message = "different files: " + only.front() + " is in only one directory";
    return report;
  }
  try {
    for (const auto& name : files_a) {
      const std::string path_a = (fs::path(dir_a) / name).string();
      const std::string path_b = (fs::path(dir_b) / name).string();
      if (name == "manifest.json") {
        const std::string diff = first_field_difference(read_file(path_a), read_file(path_b));
        if (!diff.empty()) {
          report.outcome = VerifyReport::Outcome::kDifferent;
          report.message = "manifest.json differs: " + diff;
          return report;
        }
        continue;
      }
      RecordReader reader_a(path_a, /*recover=*/false), reader_b(path_b, /*recover=*/false);
      std::string record_a, record_b;
      for (int64_t index = 0;; ++index) {
        const bool more_a = reader_a.next(&record_a);
        const bool more_b = reader_b.next(&record_b);
        if (!more_a && !more_b) break;
        if (more_a != more_b) {
          report.outcome = VerifyReport::Outcome::kDifferent;
          report.message = name + ": record " + std::to_string(index) + " (request '" + record_id(more_a ? record_a : record_b) +
                           "') exists only in " + (more_a ? dir_a : dir_b);
          return report;
        }
        const std::string diff = first_field_difference(record_a, record_b, {kScheduleFields[0]});
        if (diff.empty() && record_a != record_b) ++report.schedule_differences;
        if (!diff.empty()) {
          report.outcome = VerifyReport::Outcome::kDifferent;
          report.message = name + ": request '" + record_id(record_a) + "' (record " + std::to_string(index) + ") differs in " + diff;
          return report;
        }
        ++report.records;
      }
    }
  } catch (const std::exception& error) {
    report.outcome = VerifyReport::Outcome::kUnreadable;
    report.message = std::string("unreadable: ") + error.what();
    return report;
  }
  report.message = "identical: " + std::to_string(report.records) + " records";
  if (report.schedule_differences)
    report.message += " (" + std::to_string(report.schedule_differences) +
                      " differ only in their step metrics, which describe the schedule: e.g. a resumed run)";
  return report;
}

}  // namespace deepinfer::io
