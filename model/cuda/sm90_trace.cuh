#pragma once
// Timing experiments of model/cuda/sparse_attention_sm90.cu (tests/gpu/kernel_micro.sh trace):
// built with -DDEEPINFER_SM90_TRACE=1, the kernel stamps numbered points and
// sm90_trace_report() prints them; otherwise trace() is empty. Included by that file alone.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#ifndef DEEPINFER_SM90_TRACE
#define DEEPINFER_SM90_TRACE 0
#endif

namespace deepinfer::model::cuda {
namespace sm90 {

// Timing experiments: the first thread of each warpgroup stamps the SM clock and the global timer
// at numbered points of the kernel; sm90_trace_report() prints them. Points: 0 entry, 2 the row's
// indices read (start, slot, row, pick), 3 the first key rows found, 1 q and
// tile 0 copies issued, 4 + 4 t + {0 tile t's keys in, 1 its scores done (group 0), 2 P handed
// over, 3 P V done}, 60 tiles done, 61 and 62 the cluster's barriers, 63 exit.
#if DEEPINFER_SM90_TRACE
constexpr int kTracePoints = 64, kTraceBlocks = 1024;
__device__ unsigned long long trace_stamps[kTraceBlocks][2][kTracePoints][2];  // [block][group][point] {clock, ns}
#endif
__device__ __forceinline__ void trace(int point) {
#if DEEPINFER_SM90_TRACE
  const unsigned block = blockIdx.y * gridDim.x + blockIdx.x;
  if (threadIdx.x % 128 != 0 || block >= kTraceBlocks || point >= kTracePoints) return;
  unsigned long long ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns)::"memory");
  trace_stamps[block][threadIdx.x / 128][point][0] = clock64();
  trace_stamps[block][threadIdx.x / 128][point][1] = ns;
#endif
}

}  // namespace sm90

#if DEEPINFER_SM90_TRACE
// The last launch's stamps: each point's median and largest time after its block's entry (the SM
// clock, converted at the rate the global timer shows), and the launch's span by the global timer.
void sm90_trace_report() {
  std::vector<unsigned long long> t(size_t{sm90::kTraceBlocks} * 2 * sm90::kTracePoints * 2);
  if (cudaMemcpyFromSymbol(t.data(), sm90::trace_stamps, t.size() * 8) != cudaSuccess) return;
  const auto at = [&](int b, int g, int p, int i) { return t[((size_t(b) * 2 + g) * sm90::kTracePoints + p) * 2 + i]; };
  unsigned long long first = ~0ull, last = 0, last_entry = 0;
  double ghz = 0;
  int blocks = 0;
  for (int b = 0; b < sm90::kTraceBlocks; ++b) {
    if (at(b, 0, 0, 1) == 0 || at(b, 0, 63, 1) == 0) continue;
    first = std::min(first, at(b, 0, 0, 1));
    last_entry = std::max(last_entry, at(b, 0, 0, 1));
    last = std::max(last, at(b, 0, 63, 1));
    ghz += double(at(b, 0, 63, 0) - at(b, 0, 0, 0)) / double(at(b, 0, 63, 1) - at(b, 0, 0, 1));
    ++blocks;
  }
  if (blocks == 0) return;
  ghz /= blocks;
  std::printf("  trace: %d blocks, span %.2f us (entries spread over %.2f us), SM clock %.2f GHz\n", blocks, (last - first) * 1e-3,
              (last_entry - first) * 1e-3, ghz);
  for (int p = 1; p < sm90::kTracePoints; ++p) {
    std::vector<double> us[2];
    for (int g = 0; g < 2; ++g) {
      for (int b = 0; b < sm90::kTraceBlocks; ++b)
        if (at(b, 0, 0, 1) != 0 && at(b, 0, 63, 1) != 0 && at(b, g, p, 0) != 0)
          us[g].push_back(double(at(b, g, p, 0) - at(b, 0, 0, 0)) / ghz * 1e-3);
      std::sort(us[g].begin(), us[g].end());
    }
    if (us[0].empty() && us[1].empty()) continue;
    std::printf("  trace point %2d:", p);
    for (int g = 0; g < 2; ++g)
      if (!us[g].empty()) std::printf("  group %d median %6.2f max %6.2f us (%zu)", g, us[g][us[g].size() / 2], us[g].back(), us[g].size());
    std::printf("\n");
  }
}
#endif

}  // namespace deepinfer::model::cuda
