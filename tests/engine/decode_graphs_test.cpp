// The decode buckets (engine/decode_graphs.h) and DecodeGraphs without graphs (CPU): every step
// runs eagerly and is counted; a CPU device never makes graphs even when asked.
#include "engine/decode_graphs.h"

#include <gtest/gtest.h>

namespace deepinfer::engine {
namespace {

TEST(DecodeGraphs, BucketsHoldTheirRowsAndBlocks) {
  const std::vector<std::pair<int64_t, int64_t>> rows = {{1, 1},     {2, 2},     {3, 4},     {5, 8},     {9, 16},   {17, 24},
                                                         {25, 32},   {33, 48},   {49, 64},   {65, 96},   {97, 128}, {129, 160},
                                                         {200, 224}, {256, 256}, {257, 320}, {321, 384}, {512, 512}};
  for (const auto& [n, bucket] : rows) EXPECT_EQ(decode_bucket(n), bucket) << n << " rows";
  for (int64_t n = 1; n <= 1000; ++n) EXPECT_GE(decode_bucket(n), n);
  EXPECT_EQ(block_bucket(1, 16), 1);
  EXPECT_EQ(block_bucket(3, 16), 4);
  EXPECT_EQ(block_bucket(9, 16), 16);
  EXPECT_EQ(block_bucket(9, 12), 12) << "never wider than the widest table";
  EXPECT_EQ(block_bucket(20, 12), 20) << "never narrower than the step's own tables";
  EXPECT_THROW(decode_bucket(0), c10::Error);
}

TEST(DecodeGraphs, OffOrOnTheCpuEveryStepRunsEagerly) {
  for (const bool enabled : {false, true}) {
    DecodeGraphs graphs(at::kCPU, enabled);
    EXPECT_FALSE(graphs.enabled());
    int calls = 0;
    for (int i = 0; i < 3; ++i) {
      const SampleResult r = graphs.run("8x1", nullptr, 1, [&] {
        ++calls;
        SampleResult out;
        out.tokens = at::full({2}, i, at::kLong);
        return out;
      });
      EXPECT_EQ(r.tokens[0].item<int64_t>(), i);
    }
    EXPECT_EQ(calls, 3);
    EXPECT_EQ(graphs.stats().eager, 3);
    EXPECT_EQ(graphs.stats().replayed, 0);
  }
}

}  // namespace
}  // namespace deepinfer::engine
