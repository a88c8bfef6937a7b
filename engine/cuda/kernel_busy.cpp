// The CUDA build's engine/cuda/kernel_busy.h: CUPTI's activity API. CUPTI hands records over in
// buffers, through two plain callbacks that carry no user data (and may run on CUPTI's own
// thread), so what they collect lives in one process-wide Records, as CUPTI's activity API is
// process-wide itself.
#include "engine/cuda/kernel_busy.h"

#include <cuda_runtime_api.h>
#include <cupti.h>

#include <cstdlib>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>

#include "engine/check.h"

namespace deepinfer::engine::cuda {
namespace {

constexpr size_t kBufferBytes = size_t{8} << 20;  // ~40K kernel records a buffer
constexpr size_t kRecordAlignment = 8;            // what CUPTI asks of a buffer
constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};

// What the buffer callbacks collect. `recording`: a meter's window is open (one at a time).
struct Records {
  std::mutex mutex;
  std::vector<KernelInterval> kernels;
  std::vector<ActivityInterval> memcpy, memset;
  int64_t dropped = 0;
  bool recording = false;
  bool callbacks_registered = false;
};

// Never destroyed: CUPTI may still deliver a buffer while the process exits.
Records& records() {
  static Records* r = new Records;
  return *r;
}

void check(CUptiResult result, const char* call) {
  if (result == CUPTI_SUCCESS) return;
  const char* text = nullptr;
  if (cuptiGetResultString(result, &text) != CUPTI_SUCCESS || text == nullptr) text = "unknown CUPTI error";
  throw std::runtime_error(std::string("KernelBusyMeter: ") + call + ": " + text);
}

void check(cudaError_t error, const char* call) {
  if (error != cudaSuccess) throw std::runtime_error(std::string("KernelBusyMeter: ") + call + ": " + cudaGetErrorString(error));
}

// A record's interval, or a dropped one when CUPTI left its timestamps unset or reversed.
template <class Record>
void add(const CUpti_Activity* activity, std::vector<ActivityInterval>& to, int64_t& dropped) {
  const auto* record = reinterpret_cast<const Record*>(activity);
  if (record->start == 0 || record->end < record->start) {
    ++dropped;
    return;
  }
  to.push_back({record->start, record->end});
}

// A kernel record's interval with its name (the pointer, demangled at stop()), or a dropped one.
void add_kernel(const CUpti_Activity* activity, std::vector<KernelInterval>& to, int64_t& dropped) {
  const auto* record = reinterpret_cast<const CUpti_ActivityKernel10*>(activity);
  if (record->start == 0 || record->end < record->start) {
    ++dropped;
    return;
  }
  to.push_back({.name = record->name, .interval = {record->start, record->end}});
}

// The intervals of `kernels`, which it frees.
std::vector<ActivityInterval> intervals_of(std::vector<KernelInterval>& kernels) {
  std::vector<ActivityInterval> intervals;
  intervals.reserve(kernels.size());
  for (const KernelInterval& k : kernels) intervals.push_back(k.interval);
  std::vector<KernelInterval>().swap(kernels);
  return intervals;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kRecordAlignment, kBufferBytes));  // null: CUPTI drops, and counts
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

// No exception may leave a CUPTI callback: a record that cannot be kept counts as dropped.
void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t size, size_t valid_size) {
  Records& r = records();
  {
    const std::lock_guard lock(r.mutex);
    CUpti_Activity* activity = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid_size, &activity) == CUPTI_SUCCESS) {
      try {
        switch (activity->kind) {
          case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: add_kernel(activity, r.kernels, r.dropped); break;
          case CUPTI_ACTIVITY_KIND_MEMCPY: add<CUpti_ActivityMemcpy6>(activity, r.memcpy, r.dropped); break;
          case CUPTI_ACTIVITY_KIND_MEMSET: add<CUpti_ActivityMemset4>(activity, r.memset, r.dropped); break;
          default: break;
        }
      } catch (const std::bad_alloc&) {
        ++r.dropped;
      }
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS) r.dropped += static_cast<int64_t>(dropped);
  }
  std::free(buffer);
}

void disable_kinds() {
  for (const CUpti_ActivityKind kind : kKinds) cuptiActivityDisable(kind);
}

}  // namespace

bool KernelBusyMeter::available() { return true; }

KernelBusyMeter::KernelBusyMeter() {
  Records& r = records();
  const std::lock_guard lock(r.mutex);
  if (r.callbacks_registered) return;
  check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
  r.callbacks_registered = true;
}

KernelBusyMeter::~KernelBusyMeter() {
  if (!running_) return;
  disable_kinds();
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  Records& r = records();
  const std::lock_guard lock(r.mutex);
  r.recording = false;
}

void KernelBusyMeter::start() {
  Records& r = records();
  {
    const std::lock_guard lock(r.mutex);
    ENGINE_ASSERT(!r.recording, "KernelBusyMeter::start: a meter is recording already (CUPTI's activity API is per process)");
    r.recording = true;
    r.kernels.clear();
    r.memcpy.clear();
    r.memset.clear();
    r.dropped = 0;
  }
  try {
    for (const CUpti_ActivityKind kind : kKinds) check(cuptiActivityEnable(kind), "cuptiActivityEnable");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    check(cuptiGetTimestamp(&from_), "cuptiGetTimestamp");
  } catch (...) {
    disable_kinds();
    const std::lock_guard lock(r.mutex);
    r.recording = false;
    throw;
  }
  running_ = true;
}

KernelBusy KernelBusyMeter::stop() {
  ENGINE_ASSERT(running_, "KernelBusyMeter::stop without start()");
  uint64_t to = 0;
  const CUptiResult clock = cuptiGetTimestamp(&to);
  const cudaError_t sync = cudaDeviceSynchronize();  // the records of work launched before `to` complete
  disable_kinds();
  const CUptiResult flush = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  running_ = false;
  Records& r = records();
  std::vector<KernelInterval> kernels;
  std::vector<ActivityInterval> memcpy, memset;
  KernelBusy busy;
  {
    const std::lock_guard lock(r.mutex);
    r.recording = false;
    kernels.swap(r.kernels);
    memcpy.swap(r.memcpy);
    memset.swap(r.memset);
    busy.dropped_records = r.dropped;
  }
  check(clock, "cuptiGetTimestamp");
  check(sync, "cudaDeviceSynchronize");
  check(flush, "cuptiActivityFlushAll");
  busy.wall_s = 1e-9 * static_cast<double>(to - from_);
  busy.top_kernels = summarize_kernels(kernels, from_, to);
  busy.kernels = summarize_activity(intervals_of(kernels), from_, to);
  busy.memcpy = summarize_activity(std::move(memcpy), from_, to);
  busy.memset = summarize_activity(std::move(memset), from_, to);
  return busy;
}

}  // namespace deepinfer::engine::cuda
