// summarize_activity (engine/cuda/kernel_busy.h): the union, count and gaps of device intervals in
// a window. Plain arithmetic, in the CPU build as in the CUDA one (its test runs everywhere).
#include <algorithm>

#include "engine/check.h"
#include "engine/cuda/kernel_busy.h"

namespace deepinfer::engine::cuda {

DeviceActivity summarize_activity(std::vector<ActivityInterval> intervals, uint64_t from, uint64_t to) {
  ENGINE_CHECK(from <= to, "summarize_activity: the window [", from, ", ", to, ") ends before it starts");
  std::erase_if(intervals, [&](const ActivityInterval& i) { return i.end <= from || i.start >= to; });
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

}  // namespace deepinfer::engine::cuda
