#include "launch/args.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <stdexcept>

namespace deepinfer::launch {

Args::Args(int argc, char** argv, int first, std::set<std::string> value_options, std::set<std::string> flag_options) {
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0 || arg == "--") {
      positionals_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> inline_value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (flag_options.count(name)) {
      if (inline_value) throw std::invalid_argument("option --" + name + " takes no value");
      flags_.insert(name);
    } else if (value_options.count(name)) {
      if (inline_value) {
        values_.emplace(name, *inline_value);
      } else {
        if (i + 1 >= argc) throw std::invalid_argument("option --" + name + " needs a value");
        values_.emplace(name, argv[++i]);
      }
    } else {
      throw std::invalid_argument("unknown option --" + name);
    }
  }
}

// A single-valued option given twice takes its last value, as in most command-line tools.
std::string Args::get(const std::string& name) const {
  auto [begin, end] = values_.equal_range(name);
  if (begin == end) throw std::invalid_argument("missing required option --" + name);
  return std::prev(end)->second;
}

std::string Args::get_or(const std::string& name, const std::string& fallback) const { return has(name) ? get(name) : fallback; }

int64_t Args::get_int(const std::string& name, int64_t fallback) const {
  if (!has(name)) return fallback;
  const std::string text = get(name);
  std::size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty()) throw std::invalid_argument("option --" + name + " = '" + text + "' is not an integer");
  return value;
}

int64_t Args::get_int(const std::string& name, int64_t fallback, int64_t lo, int64_t hi) const {
  const int64_t value = get_int(name, fallback);
  if (has(name) && (value < lo || value > hi))
    throw std::invalid_argument("option --" + name + " = " + get(name) + " is out of range [" + std::to_string(lo) + ", " +
                                std::to_string(hi) + "]");
  return value;
}

double Args::get_double(const std::string& name, double fallback, double lo) const {
  if (!has(name)) return fallback;
  const std::string text = get(name);
  double value = 0;  // decimal or scientific, nothing around it (no spaces, no hexadecimal)
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error == std::errc::result_out_of_range)
    throw std::invalid_argument("option --" + name + " = '" + text + "' is outside the range of a double");
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || !std::isfinite(value))
    throw std::invalid_argument("option --" + name + " = '" + text + "' is not a finite number");
  if (value < lo) {
    char bound[32];
    std::snprintf(bound, sizeof bound, "%g", lo);
    throw std::invalid_argument("option --" + name + " = " + text + " must be >= " + bound);
  }
  return value;
}

uint64_t Args::get_uint64(const std::string& name, uint64_t fallback) const {
  if (!has(name)) return fallback;
  const std::string text = get(name);
  std::size_t used = 0;
  uint64_t value = 0;
  try {
    if (!text.empty() && text[0] != '-') value = std::stoull(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty())
    throw std::invalid_argument("option --" + name + " = '" + text + "' is not a non-negative integer");
  return value;
}

std::vector<std::string> Args::all(const std::string& name) const {
  std::vector<std::string> out;
  auto [begin, end] = values_.equal_range(name);
  for (auto it = begin; it != end; ++it) out.push_back(it->second);
  return out;
}

}  // namespace deepinfer::launch
