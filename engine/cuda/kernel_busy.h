#pragma once
// KernelBusyMeter: how much of a stretch of wall time the GPU spent running kernels (bench
// --kernel-busy, issue 19). Between start() and stop() CUPTI records the start and end of every
// kernel, memcpy and memset of the process (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, which keeps
// kernels concurrent, MEMCPY, MEMSET); stop() returns, per kind, the union of those intervals
// (kernels that overlap count once) within the window as a fraction of the window's wall time,
// and per kernel name the count and device time of the kernels (top_kernels), which tells where
// the time of a run with CUDA graphs on goes.
// kernel_busy.cpp implements it with CUPTI in the CUDA build; kernel_busy_absent.cpp in the CPU
// build, where available() is false and start() and stop() throw. Torch-free.
// Owns: CUPTI's activity buffers and the intervals they held (16 bytes per record, 24 per kernel
// record, until stop()).
// Does not own: the work measured. CUPTI's activity API is per process: one meter records at a
// time, and every device of the process lands on one timeline (meant for one device per process).
// Recording adds a little device and host time per kernel: a run measured this way is not the
// run's plain throughput.

#include <cstdint>
#include <string>
#include <vector>

namespace deepinfer::engine::cuda {

// One kind of device activity in a window.
struct DeviceActivity {
  int64_t count = 0;       // records whose interval overlaps the window
  double busy_s = 0;       // union of those intervals, clipped to the window
  double fraction = 0;     // busy_s / the window's length
  double mean_gap_us = 0;  // idle time from the first start to the last end, over count - 1 (0 below 2)
};

// The kernels of one name in a window (summarize_kernels).
struct KernelTime {
  std::string name;    // short_kernel_name
  int64_t count = 0;   // kernels whose interval overlaps the window
  double total_s = 0;  // their device time (end - start), clipped to the window; overlaps add up
  double mean_us = 0;  // total_s / count
};

// A summary of the window from start() to stop().
struct KernelBusy {
  double wall_s = 0;  // host clock (cuptiGetTimestamp, the clock of the records)
  DeviceActivity kernels, memcpy, memset;
  std::vector<KernelTime> top_kernels;  // every kernel name of `kernels`, by total_s descending
  // Records CUPTI dropped or delivered without valid timestamps: above 0 the figures undercount.
  int64_t dropped_records = 0;
};

// A device interval in nanoseconds of the CUPTI clock: [start, end).
struct ActivityInterval {
  uint64_t start = 0;
  uint64_t end = 0;
};

// The figures of `intervals` (any order, may overlap) in the window [from, to): those that do
// not overlap it are not counted, the others are clipped to it. Plain arithmetic, both builds.
DeviceActivity summarize_activity(std::vector<ActivityInterval> intervals, uint64_t from, uint64_t to);

// A kernel's interval and its name as CUPTI gives it (mangled; CUPTI shares one pointer among the
// records of a kernel, and it stays valid).
struct KernelInterval {
  const char* name = nullptr;  // null reads "(unnamed)"
  ActivityInterval interval;
};

// A kernel's name for a profile: demangled (abi::__cxa_demangle; a name that does not demangle
// stays as it is), without the return type and the parameter list, "(anonymous namespace)" as
// "(anon)", and past kMaxKernelName characters cut to that many, the last three "...". Template
// arguments stay (they tell instances apart) within that length.
inline constexpr size_t kMaxKernelName = 120;
std::string short_kernel_name(const char* mangled);

// Per short_kernel_name (names that shorten alike add up) the kernels of `kernels` whose interval
// overlaps [from, to), as summarize_activity counts them, each interval clipped to the window;
// by total_s descending, ties by name. Plain arithmetic, both builds.
std::vector<KernelTime> summarize_kernels(const std::vector<KernelInterval>& kernels, uint64_t from, uint64_t to);

class KernelBusyMeter final {
 public:
  // False in the CPU build. In the CUDA build true; the constructor or start() still throws
  // where CUPTI cannot trace (no device, no CUPTI library that fits the driver).
  static bool available();

  // Attaches CUPTI to the process (registers its buffer callbacks) and records nothing yet.
  // Construct it before capturing CUDA graphs whose replays start() is to see: CUPTI attached
  // after a capture may not trace that graph's kernels.
  KernelBusyMeter();
  ~KernelBusyMeter();  // stops recording, if still on, and drops what was recorded
  KernelBusyMeter(const KernelBusyMeter&) = delete;
  KernelBusyMeter& operator=(const KernelBusyMeter&) = delete;

  // Turns recording on, waits for the current device to finish the work queued before (which
  // CUPTI would not see), then opens the window. Throws when this or another meter is on.
  void start();
  // Closes the window, waits for the current device so that the records of the work launched
  // before are complete (the part that runs after the window is clipped), turns recording off
  // and returns the window's figures. Throws unless start() came before.
  KernelBusy stop();

 private:
  bool running_ = false;
  uint64_t from_ = 0;  // the window's start, ns of the CUPTI clock
};

}  // namespace deepinfer::engine::cuda
