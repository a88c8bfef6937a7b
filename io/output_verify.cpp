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

namespace {

// Two texts that differ, each shortened around the first byte where they part (so a long
// value shows its difference, not just its start).
std::string show_difference(const std::string& a, const std::string& b) {
  std::size_t at = 0;
  while (at < a.size() && at < b.size() && a[at] == b[at]) ++at;
  const std::size_t from = at > 30 ? at - 30 : 0;
  auto cut = [from](const std::string& text) {
    std::string part = text.substr(std::min(from, text.size()), 60);
    return (from > 0 ? "..." : "") + part + (from + 60 < text.size() ? "..." : "");
  };
  return cut(a) + " vs " + cut(b);
}

std::string missing_field(const std::string& path, bool has_a, simdjson::dom::element va, bool has_b, simdjson::dom::element vb) {
  return "field '" + path + "': " + (has_a ? shorten(simdjson::minify(va)) : "(absent)") + " vs " +
         (has_b ? shorten(simdjson::minify(vb)) : "(absent)");
}

// The path of the first difference between two JSON values ("job.inputs[0].sha256") and the
// two values there; empty if equal. Objects are compared key by key (a's order, then b's new
// keys; top-level keys in `ignore` skipped), arrays element by element, anything else by its
// minified text.
std::string value_difference(simdjson::dom::element a, simdjson::dom::element b, const std::string& path,
                             std::initializer_list<std::string_view> ignore) {
  using simdjson::dom::element_type;
  if (a.type() == element_type::OBJECT && b.type() == element_type::OBJECT) {
    const simdjson::dom::object oa = a.get_object().value_unsafe(), ob = b.get_object().value_unsafe();
    std::vector<std::string> order;
    for (auto field : oa) order.emplace_back(field.key);
    for (auto field : ob)
      if (std::find(order.begin(), order.end(), field.key) == order.end()) order.emplace_back(field.key);
    for (const auto& key : order) {
      if (path.empty() && std::find(ignore.begin(), ignore.end(), key) != ignore.end()) continue;
      simdjson::dom::element va, vb;
      const bool has_a = oa[key].get(va) == simdjson::SUCCESS;
      const bool has_b = ob[key].get(vb) == simdjson::SUCCESS;
      const std::string where = path.empty() ? key : path + "." + key;
      if (!has_a || !has_b) return missing_field(where, has_a, va, has_b, vb);
      std::string diff = value_difference(va, vb, where, {});
      if (!diff.empty()) return diff;
    }
    return "";
  }
  if (a.type() == element_type::ARRAY && b.type() == element_type::ARRAY) {
    const simdjson::dom::array xs = a.get_array().value_unsafe(), ys = b.get_array().value_unsafe();
    auto x = xs.begin(), y = ys.begin();
    for (std::size_t index = 0; x != xs.end() && y != ys.end(); ++x, ++y, ++index) {
      std::string diff = value_difference(*x, *y, path + "[" + std::to_string(index) + "]", {});
      if (!diff.empty()) return diff;
    }
    if (xs.size() != ys.size())
      return "field '" + path + "': " + std::to_string(xs.size()) + " vs " + std::to_string(ys.size()) + " elements";
    return "";
  }
  const std::string ta = simdjson::minify(a), tb = simdjson::minify(b);
  return ta == tb ? "" : "field '" + path + "': " + show_difference(ta, tb);
}

}  // namespace

std::string first_field_difference(const std::string& json_a, const std::string& json_b, std::initializer_list<std::string_view> ignore) {
  if (json_a == json_b) return "";
  simdjson::dom::parser parser_a, parser_b;
  simdjson::dom::element a, b;
  if (parser_a.parse(json_a).get(a) || parser_b.parse(json_b).get(b) || a.type() != simdjson::dom::element_type::OBJECT ||
      b.type() != simdjson::dom::element_type::OBJECT)
    return "record text: " + show_difference(json_a, json_b);
  const std::string diff = value_difference(a, b, "", ignore);
  return diff.empty() && ignore.size() == 0 ? "key order or formatting" : diff;
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
        const std::string manifest_a = read_file(path_a), manifest_b = read_file(path_b);
        for (const auto& [path, text] : {std::pair{&path_a, &manifest_a}, std::pair{&path_b, &manifest_b}}) {
          simdjson::dom::parser parser;
          simdjson::dom::object object;
          if (const auto error = parser.parse(*text).get(object))
            throw std::runtime_error(*path + " is not a JSON object (" + simdjson::error_message(error) + ")");
        }
        const std::string diff = first_field_difference(manifest_a, manifest_b);
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
