// PartTimer (engine/part_timer.h) on the CPU, where its marks are host times: a part lasts from
// its mark to the next, sums go to the part and the mark's layer type, the gap after a step's
// end is no part's, and with decode_only a non-decode step leaves nothing behind.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "engine/part_timer.h"

namespace deepinfer::engine {
namespace {

using model::ForwardPart;
using model::LayerType;

void busy(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

double sum_of(const std::vector<PartTimer::Row>& rows, ForwardPart part, const std::string& type) {
  double ms = 0;
  for (const auto& row : rows)
    if (row.part == part && row.layer_type == type) ms += row.ms;
  return ms;
}

void step(PartTimer& timer, bool decode) {
  timer.enter(ForwardPart::kStaging, -1);
  busy(2);
  timer.enter(ForwardPart::kAttnCore, 1);  // layer 1: CSA
  busy(20);
  timer.enter(ForwardPart::kRoutedExperts, 0);  // layer 0: SWA
  busy(10);
  timer.end_step(decode);
  busy(100);  // between steps: no part's
}

TEST(PartTimer, SumsEachPartUntilTheNextMarkByLayerType) {
  PartTimer timer(at::kCPU, {LayerType::kSliding, LayerType::kCsa});
  step(timer, true);
  step(timer, true);
  EXPECT_EQ(timer.steps(), 2);
  const auto rows = timer.totals();
  EXPECT_GE(sum_of(rows, ForwardPart::kAttnCore, "CSA"), 2 * 20.0);
  EXPECT_LT(sum_of(rows, ForwardPart::kAttnCore, "CSA"), 2 * 20.0 + 100.0);
  EXPECT_GE(sum_of(rows, ForwardPart::kRoutedExperts, "SWA"), 2 * 10.0);
  EXPECT_LT(sum_of(rows, ForwardPart::kRoutedExperts, "SWA"), 2 * 10.0 + 100.0);  // with the 100 ms gaps it would be >= 220
  EXPECT_GE(sum_of(rows, ForwardPart::kStaging, "-"), 2 * 2.0);
  EXPECT_EQ(sum_of(rows, ForwardPart::kAttnCore, "SWA"), 0.0);
}

TEST(PartTimer, DropsStepsThatAreNotDecodeStepsAndResets) {
  PartTimer timer(at::kCPU, {LayerType::kSliding, LayerType::kCsa});
  step(timer, false);
  step(timer, true);
  step(timer, false);
  EXPECT_EQ(timer.steps(), 1);
  EXPECT_LT(sum_of(timer.totals(), ForwardPart::kAttnCore, "CSA"), 20.0 + 39.0);  // the dropped steps would add >= 40
  timer.reset();
  EXPECT_EQ(timer.steps(), 0);
  EXPECT_TRUE(timer.totals().empty());
  PartTimer all(at::kCPU, {LayerType::kSliding, LayerType::kCsa}, /*decode_only=*/false);
  step(all, false);
  step(all, true);
  EXPECT_EQ(all.steps(), 2);
}

}  // namespace
}  // namespace deepinfer::engine
