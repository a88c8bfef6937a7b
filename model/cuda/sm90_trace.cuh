#pragma once
// Timing experiments of model/cuda/sparse_attention_sm90.cu and sparse_attention_heads.cu
// (tests/gpu/kernel_micro.sh trace): built with -DDEEPINFER_SM90_TRACE=1, a kernel stamps numbered
// points and report_trace() prints them; otherwise trace() is empty. Each file that includes it
// has its own stamps (internal linkage) and exports its own report (sm90_trace_report(),
// heads_trace_report()).

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#ifndef DEEPINFER_SM90_TRACE
#define DEEPINFER_SM90_TRACE 0
#endif
// The warp of each warpgroup whose first thread stamps (0..3): another warp's view of the same points.
#ifndef DEEPINFER_SM90_TRACE_WARP
#define DEEPINFER_SM90_TRACE_WARP 0
#endif

namespace deepinfer::model::cuda {
namespace sm90 {

// Timing experiments: the first thread of warp DEEPINFER_SM90_TRACE_WARP of each warpgroup (up to
// three) stamps the SM clock and the global timer at numbered points of the kernel (each kernel's
// file lists its points; 0 is the entry and 63 the exit of warpgroup 0); report_trace() prints them.
#if DEEPINFER_SM90_TRACE
constexpr int kTracePoints = 64, kTraceBlocks = 1024, kTraceGroups = 3;
static __device__ unsigned long long trace_stamps[kTraceBlocks][kTraceGroups][kTracePoints][2];  // [block][group][point] {clock, ns}
static __device__ unsigned trace_grid[2];  // the last launch's gridDim.x, gridDim.y (for the per-split lines)
#endif
__device__ __forceinline__ void trace(int point) {
#if DEEPINFER_SM90_TRACE
  const unsigned block = blockIdx.y * gridDim.x + blockIdx.x;
  if (threadIdx.x % 128 != 32 * DEEPINFER_SM90_TRACE_WARP || threadIdx.x / 128 >= kTraceGroups || block >= kTraceBlocks ||
      point >= kTracePoints)
    return;
  unsigned long long ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns)::"memory");
  if (point == 0 && block == 0 && threadIdx.x == 0) trace_grid[0] = gridDim.x, trace_grid[1] = gridDim.y;
  trace_stamps[block][threadIdx.x / 128][point][0] = clock64();
  trace_stamps[block][threadIdx.x / 128][point][1] = ns;
#endif
}

#if DEEPINFER_SM90_TRACE
// The last launch's stamps: each point's median and largest time after its block's entry (the SM
// clock, converted at the rate the global timer shows), and the launch's span by the global timer.
[[maybe_unused]] static void report_trace() {
  constexpr int G = kTraceGroups;
  std::vector<unsigned long long> t(size_t{kTraceBlocks} * G * kTracePoints * 2);
  if (cudaMemcpyFromSymbol(t.data(), trace_stamps, t.size() * 8) != cudaSuccess) return;
  const auto at = [&](int b, int g, int p, int i) { return t[((size_t(b) * G + g) * kTracePoints + p) * 2 + i]; };
  unsigned long long first = ~0ull, last = 0, last_entry = 0;
  double ghz = 0;
  int blocks = 0;
  for (int b = 0; b < kTraceBlocks; ++b) {
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
  for (int p = 1; p < kTracePoints; ++p) {
    std::vector<double> us[G];
    for (int g = 0; g < G; ++g) {
      for (int b = 0; b < kTraceBlocks; ++b)
        if (at(b, 0, 0, 1) != 0 && at(b, 0, 63, 1) != 0 && at(b, g, p, 0) != 0)
          us[g].push_back(double(at(b, g, p, 0) - at(b, 0, 0, 0)) / ghz * 1e-3);
      std::sort(us[g].begin(), us[g].end());
    }
    if (std::all_of(us, us + G, [](const std::vector<double>& v) { return v.empty(); })) continue;
    std::printf("  trace point %2d:", p);
    for (int g = 0; g < G; ++g)
      if (!us[g].empty()) std::printf("  group %d median %6.2f max %6.2f us (%zu)", g, us[g][us[g].size() / 2], us[g].back(), us[g].size());
    std::printf("\n");
  }
  // A grid of (rows, 2 splits), the split kernel's pairs: each split's points after the launch's
  // first entry (the block's entry by the global timer, then its SM clock), and how far split 1
  // trails split 0 of the same row.
  unsigned grid[2] = {0, 0};
  if (cudaMemcpyFromSymbol(grid, trace_grid, sizeof(grid)) != cudaSuccess || grid[1] != 2 || 2 * grid[0] > unsigned(kTraceBlocks)) return;
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  for (int p : {0, 1, 3, 4, 60, 61, 62, 63}) {
    std::vector<double> split_at[2], trail;
    for (unsigned r = 0; r < grid[0]; ++r) {
      // The block's entry by the global timer, then its own clock from there.
      const auto when = [&](unsigned b) {
        return at(b, 0, 0, 1) == 0 || at(b, 0, p, 0) == 0
                   ? -1.0
                   : (double(at(b, 0, 0, 1) - first) + double(at(b, 0, p, 0) - at(b, 0, 0, 0)) / ghz) * 1e-3;
      };
      const double s0 = when(r), s1 = when(grid[0] + r);
      if (s0 >= 0) split_at[0].push_back(s0);
      if (s1 >= 0) split_at[1].push_back(s1);
      if (s0 >= 0 && s1 >= 0) trail.push_back(s1 - s0);
    }
    const size_t later = std::count_if(trail.begin(), trail.end(), [](double d) { return d > 0; });
    std::printf(
        "  trace split point %2d: split 0 median %6.2f us, split 1 median %6.2f; split 1 - split 0 of a row: median %+.2f "
        "us, later in %zu of %zu\n",
        p, median(split_at[0]), median(split_at[1]), median(trail), later, trail.size());
  }
}
#endif

}  // namespace sm90
}  // namespace deepinfer::model::cuda
