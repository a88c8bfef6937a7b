// summarize_activity, summarize_kernels and short_kernel_name (engine/cuda/kernel_busy.h), the
// arithmetic of the kernel-busy meter, in every build: overlapping intervals count once, the
// window clips, gaps are the idle time between the first start and the last end; per kernel name
// the clipped times add up, sorted by total; names are demangled and shortened.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

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

TEST(KernelBusyNames, DemangledWithoutReturnTypeOrParameters) {
  // deepinfer::engine::kernel_busy_testing::(anonymous namespace)::spin(unsigned long), as nvcc
  // names it (tests/engine/spin_kernel.cu) and as g++ does.
  EXPECT_EQ(short_kernel_name("_ZN9deepinfer6engine19kernel_busy_testing47_GLOBAL__N__426ded1e_14_spin_kernel_cu_a91f01444spinEm"),
            "deepinfer::engine::kernel_busy_testing::(anon)::spin");
  EXPECT_EQ(short_kernel_name("_ZN9deepinfer6engine19kernel_busy_testing12_GLOBAL__N_14spinEm"),
            "deepinfer::engine::kernel_busy_testing::(anon)::spin");
  EXPECT_EQ(short_kernel_name("_Z3fooIiEvT_"), "foo<int>");               // void foo<int>(int)
  EXPECT_EQ(short_kernel_name("_ZN2ns3barIfEEvPKfi"), "ns::bar<float>");  // void ns::bar<float>(float const*, int)
}

TEST(KernelBusyNames, WhatDoesNotDemangleStaysAndLongNamesAreCut) {
  EXPECT_EQ(short_kernel_name("sm90_xmma_gemm_bf16bf16_bf16f32"), "sm90_xmma_gemm_bf16bf16_bf16f32");
  EXPECT_EQ(short_kernel_name(nullptr), "(unnamed)");
  const std::string long_name = short_kernel_name(std::string(200, 'k').c_str());
  EXPECT_EQ(long_name.size(), kMaxKernelName);
  EXPECT_EQ(long_name, std::string(kMaxKernelName - 3, 'k') + "...");
}

TEST(KernelBusyKernels, CountAndTimePerNameByTotalDescending) {
  const char* a = "_Z1av";  // a()
  const char* b = "_Z1bv";
  const std::vector<KernelInterval> kernels = {{a, {0, 1000}},    {b, {1000, 4000}}, {a, {5000, 6000}},
                                               {a, {6000, 7000}}, {b, {8000, 8500}}, {nullptr, {9000, 9100}}};
  const std::vector<KernelTime> times = summarize_kernels(kernels, /*from=*/0, /*to=*/10000);
  ASSERT_EQ(times.size(), 3u);
  EXPECT_EQ(times[0].name, "b");
  EXPECT_EQ(times[0].count, 2);
  EXPECT_DOUBLE_EQ(times[0].total_s, 3500e-9);
  EXPECT_DOUBLE_EQ(times[0].mean_us, 1.75);
  EXPECT_EQ(times[1].name, "a");
  EXPECT_EQ(times[1].count, 3);
  EXPECT_DOUBLE_EQ(times[1].total_s, 3000e-9);
  EXPECT_DOUBLE_EQ(times[1].mean_us, 1.0);
  EXPECT_EQ(times[2].name, "(unnamed)");
  EXPECT_EQ(times[2].count, 1);
}

TEST(KernelBusyKernels, OverlapsAddUpAndTheWindowClips) {
  // Window 1000-5000: 0-500 lies outside, 0-2000 counts 1000 ns, 4500-7000 counts 500 ns; the
  // concurrent 1500-2500 and 1500-3500 add up (1000 + 2000 ns) where the union counts them once.
  const char* k = "_Z1kv";
  const std::vector<KernelInterval> kernels = {{k, {0, 500}}, {k, {0, 2000}}, {k, {4500, 7000}}, {k, {1500, 2500}}, {k, {1500, 3500}}};
  const std::vector<KernelTime> times = summarize_kernels(kernels, /*from=*/1000, /*to=*/5000);
  ASSERT_EQ(times.size(), 1u);
  EXPECT_EQ(times[0].count, 4);
  EXPECT_DOUBLE_EQ(times[0].total_s, 4500e-9);
  EXPECT_EQ(summarize_activity({{0, 500}, {0, 2000}, {4500, 7000}, {1500, 2500}, {1500, 3500}}, 1000, 5000).count, 4);
}

TEST(KernelBusyKernels, NamesThatShortenAlikeAddUpAndTiesGoByName) {
  // Two overloads of f (different pointers and manglings) shorten to "f"; g ties with h.
  const std::vector<KernelInterval> kernels = {{"_Z1fi", {0, 100}}, {"_Z1ff", {100, 300}}, {"_Z1hv", {300, 400}}, {"_Z1gv", {400, 500}}};
  const std::vector<KernelTime> times = summarize_kernels(kernels, /*from=*/0, /*to=*/1000);
  ASSERT_EQ(times.size(), 3u);
  EXPECT_EQ(times[0].name, "f");
  EXPECT_EQ(times[0].count, 2);
  EXPECT_DOUBLE_EQ(times[0].total_s, 300e-9);
  EXPECT_EQ(times[1].name, "g");
  EXPECT_EQ(times[2].name, "h");
  EXPECT_TRUE(summarize_kernels({}, 0, 10).empty());
  EXPECT_THROW(summarize_kernels({}, /*from=*/2, /*to=*/1), std::invalid_argument);
}

}  // namespace
}  // namespace deepinfer::engine::cuda
