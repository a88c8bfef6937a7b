#pragma once
// Command-line arguments of one subcommand: `--name value`, `--flag`, repeated options and
// positionals. Unknown or malformed options are errors that name the option.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace deepinfer::launch {

class Args final {
 public:
  // value_options take a value; flag_options do not. Throws std::invalid_argument on
  // unknown options or a missing value.
  Args(int argc, char** argv, int first, std::set<std::string> value_options, std::set<std::string> flag_options);

  bool has(const std::string& name) const { return values_.count(name) > 0; }
  bool flag(const std::string& name) const { return flags_.count(name) > 0; }
  std::string get(const std::string& name) const;  // required: throws naming the option
  std::string get_or(const std::string& name, const std::string& fallback) const;
  int64_t get_int(const std::string& name, int64_t fallback) const;
  // The same, refused (naming the option and value) outside [lo, hi].
  int64_t get_int(const std::string& name, int64_t fallback, int64_t lo, int64_t hi) const;
  // A finite number >= lo; text that is not one is refused naming the option.
  double get_double(const std::string& name, double fallback, double lo) const;
  uint64_t get_uint64(const std::string& name, uint64_t fallback) const;
  std::vector<std::string> all(const std::string& name) const;
  const std::vector<std::string>& positionals() const { return positionals_; }

 private:
  std::multimap<std::string, std::string> values_;
  std::set<std::string> flags_;
  std::vector<std::string> positionals_;
};

}  // namespace deepinfer::launch
