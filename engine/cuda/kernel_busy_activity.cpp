// summarize_activity, summarize_kernels and short_kernel_name (engine/cuda/kernel_busy.h): the
// union, count and gaps of device intervals in a window, and the time per kernel name. Plain
// arithmetic, in the CPU build as in the CUDA one (its test runs everywhere).
#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <unordered_map>

#include "engine/check.h"
#include "engine/cuda/kernel_busy.h"

namespace deepinfer::engine::cuda {
namespace {

bool overlaps(const ActivityInterval& i, uint64_t from, uint64_t to) { return i.end > from && i.start < to; }

// `name` without its trailing parameter list: the last balanced "(...)" when the name ends in ')'.
void drop_parameters(std::string& name) {
  if (name.empty() || name.back() != ')') return;
  int depth = 0;
  for (size_t p = name.size(); p-- > 0;) {
    if (name[p] == ')') ++depth;
    if (name[p] == '(' && --depth == 0) {
      name.resize(p);
      return;
    }
  }
}

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  for (size_t p = text.find(from); p != std::string::npos; p = text.find(from, p + to.size())) text.replace(p, from.size(), to);
}

}  // namespace

DeviceActivity summarize_activity(std::vector<ActivityInterval> intervals, uint64_t from, uint64_t to) {
  ENGINE_CHECK(from <= to, "summarize_activity: the window [", from, ", ", to, ") ends before it starts");
  std::erase_if(intervals, [&](const ActivityInterval& i) { return !overlaps(i, from, to); });
  for (ActivityInterval& i : intervals) i = {std::max(i.start, from), std::min(i.end, to)};
  std::sort(intervals.begin(), intervals.end(), [](const ActivityInterval& a, const ActivityInterval& b) { return a.start < b.start; });
  DeviceActivity activity;
  activity.count = static_cast<int64_t>(intervals.size());
  if (intervals.empty()) return activity;
  // Sweep in start order: `covered_to` is the end of the run of overlapping intervals so far.
  uint64_t busy_ns = 0, run_start = intervals.front().start, covered_to = intervals.front().end;
  for (const ActivityInterval& i : intervals) {
    if (i.start > covered_to) {
      busy_ns += covered_to - run_start;
      run_start = i.start;
    }
    covered_to = std::max(covered_to, i.end);
  }
  busy_ns += covered_to - run_start;
  const uint64_t span_ns = covered_to - intervals.front().start;  // first start to last end
  activity.busy_s = 1e-9 * static_cast<double>(busy_ns);
  activity.fraction = to > from ? static_cast<double>(busy_ns) / static_cast<double>(to - from) : 0.0;
  if (activity.count > 1) activity.mean_gap_us = 1e-3 * static_cast<double>(span_ns - busy_ns) / static_cast<double>(activity.count - 1);
  return activity;
}

std::string short_kernel_name(const char* mangled) {
  if (mangled == nullptr) return "(unnamed)";
  int status = -1;
  const std::unique_ptr<char, decltype(&std::free)> demangled(abi::__cxa_demangle(mangled, nullptr, nullptr, &status), &std::free);
  std::string name = status == 0 && demangled ? demangled.get() : mangled;
  drop_parameters(name);
  if (name.starts_with("void ")) name.erase(0, 5);  // a template instance's return type
  replace_all(name, "(anonymous namespace)", "(anon)");
  if (name.size() > kMaxKernelName) {
    name.resize(kMaxKernelName - 3);
    name.append("...");
  }
  return name;
}

std::vector<KernelTime> summarize_kernels(const std::vector<KernelInterval>& kernels, uint64_t from, uint64_t to) {
  ENGINE_CHECK(from <= to, "summarize_kernels: the window [", from, ", ", to, ") ends before it starts");
  struct Sum {
    int64_t count = 0;
    uint64_t ns = 0;
  };
  std::unordered_map<const char*, Sum> by_pointer;  // demangles each kernel once, not each record
  for (const KernelInterval& k : kernels) {
    if (!overlaps(k.interval, from, to)) continue;
    Sum& sum = by_pointer[k.name];
    ++sum.count;
    sum.ns += std::min(k.interval.end, to) - std::max(k.interval.start, from);
  }
  std::map<std::string, Sum> by_name;
  for (const auto& [pointer, sum] : by_pointer) {
    Sum& named = by_name[short_kernel_name(pointer)];
    named.count += sum.count;
    named.ns += sum.ns;
  }
  std::vector<KernelTime> times;
  for (const auto& [name, sum] : by_name) {
    const double ns = static_cast<double>(sum.ns);
    times.push_back({.name = name, .count = sum.count, .total_s = 1e-9 * ns, .mean_us = 1e-3 * ns / static_cast<double>(sum.count)});
  }
  std::stable_sort(times.begin(), times.end(), [](const KernelTime& a, const KernelTime& b) { return a.total_s > b.total_s; });
  return times;
}

}  // namespace deepinfer::engine::cuda
