// summarize_activity (engine/cuda/kernel_busy.h), the arithmetic of the kernel-busy meter, in
// every build: overlapping intervals count once, the window clips, gaps are the idle time
// between the first start and the last end.
#include <gtest/gtest.h>

#include <stdexcept>

#include "engine/cuda/kernel_busy.h"

namespace deepinfer::engine::cuda {
namespace {

TEST(KernelBusyActivity, EmptyWindowHasNothing) {
  const DeviceActivity a = summarize_activity({}, /*from=*/100, /*to=*/200);
  EXPECT_EQ(a.count, 0);
  EXPECT_EQ(a.busy_s, 0);
  EXPECT_EQ(a.fraction, 0);
  EXPECT_EQ(a.mean_gap_us, 0);
}

TEST(KernelBusyActivity, DisjointIntervalsAddUpAndGapsAverage) {
  // Busy 0-1000, 3000-4000, 9000-10000 ns in a 20,000 ns window; gaps 2000 and 5000 ns.
  const DeviceActivity a = summarize_activity({{3000, 4000}, {0, 1000}, {9000, 10000}}, /*from=*/0, /*to=*/20000);
  EXPECT_EQ(a.count, 3);
  EXPECT_DOUBLE_EQ(a.busy_s, 3000e-9);
  EXPECT_DOUBLE_EQ(a.fraction, 0.15);
  EXPECT_DOUBLE_EQ(a.mean_gap_us, 3.5);
}

TEST(KernelBusyActivity, OverlappingIntervalsCountOnce) {
  // 0-1000 and 500-1500 overlap, 1200-1300 lies inside the second; 2000-3000 touches nothing.
  const DeviceActivity a = summarize_activity({{0, 1000}, {1200, 1300}, {500, 1500}, {2000, 3000}}, /*from=*/0, /*to=*/10000);
  EXPECT_EQ(a.count, 4);
  EXPECT_DOUBLE_EQ(a.busy_s, 2500e-9);
  EXPECT_DOUBLE_EQ(a.fraction, 0.25);
  EXPECT_DOUBLE_EQ(a.mean_gap_us, 500.0 / 3 * 1e-3);  // one gap of 500 ns over 3
}

TEST(KernelBusyActivity, TouchingIntervalsLeaveNoGap) {
  const DeviceActivity a = summarize_activity({{0, 1000}, {1000, 2000}}, /*from=*/0, /*to=*/4000);
  EXPECT_DOUBLE_EQ(a.busy_s, 2000e-9);
  EXPECT_EQ(a.mean_gap_us, 0);
}

TEST(KernelBusyActivity, TheWindowClipsAndDropsWhatLiesOutside) {
  // Window 1000-5000: 0-500 and 5000-6000 lie outside; 0-2000 and 4500-7000 are clipped.
  const DeviceActivity a = summarize_activity({{0, 500}, {0, 2000}, {4500, 7000}, {5000, 6000}}, /*from=*/1000, /*to=*/5000);
  EXPECT_EQ(a.count, 2);
  EXPECT_DOUBLE_EQ(a.busy_s, 1500e-9);
  EXPECT_DOUBLE_EQ(a.fraction, 1500.0 / 4000);
  EXPECT_DOUBLE_EQ(a.mean_gap_us, 2.5);
}

TEST(KernelBusyActivity, AWindowThatEndsBeforeItStartsIsRefused) {
  EXPECT_THROW(summarize_activity({}, /*from=*/2, /*to=*/1), std::invalid_argument);
}

}  // namespace
}  // namespace deepinfer::engine::cuda
