// DecodeCost (model/step_cost.h): the decode-step roofline's byte and FLOP counts on the tiny
// config (D 256, I 128, 8 experts, top-2, 6 layers of which 3 hash-routed), checked against
// figures worked out by hand from the config.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "model/random_weights.h"
#include "model/step_cost.h"

namespace deepinfer::model {
namespace {

ModelConfig tiny() {
  const char* dir = std::getenv("DEEPINFER_SOURCE_DIR");
  return load_model_config(std::string(dir != nullptr ? dir : ".") + "/configs/models/tiny.json");
}

TEST(DecodeCost, RoutedExpertsTouchedFollowTheBatch) {
  const ModelConfig c = tiny();
  const ModelWeights weights = random_weights(c, WeightFormat{io::DType::kF32, false, false}, /*seed=*/3, at::kCPU);
  const DecodeCost cost(weights, /*world_size=*/1);
  const double expert = 3.0 * 128 * 256 * 4;  // w1, w2, w3 in float32
  // One token picks k = 2 of 8 experts per layer; a large batch touches all 8. Per extra token: its
  // embedding row (256 floats) and a tid2eid row (2 int64) in each of the 3 hash layers.
  const double one = cost.step(1, 1).weight_bytes, many = cost.step(10001, 1).weight_bytes;
  EXPECT_NEAR(many - one, 6 * (8 - 2) * expert + 10000 * (256 * 4 + 3 * 2 * 8), 1.0);
  EXPECT_NEAR(cost.step(2, 1).weight_bytes - one, 6 * 8 * (1 - 0.75 * 0.75 - 0.25) * expert + 256 * 4 + 3 * 2 * 8, 1e-6);
}

TEST(DecodeCost, Fp4ExpertsCountTheirPackedBytesAndScales) {
  const ModelConfig c = tiny();
  const ModelWeights weights = random_weights(c, WeightFormat{io::DType::kBF16, false, true}, /*seed=*/3, at::kCPU);
  const DecodeCost cost(weights, 1);
  const double expert = 3.0 * (128 * 256 / 2 + 128 * 256 / 32);  // two codes a byte, one e8m0 per 32
  EXPECT_NEAR(cost.step(10001, 1).weight_bytes - cost.step(1, 1).weight_bytes, 6 * 6 * expert + 10000 * (256 * 2 + 3 * 2 * 8), 1.0);
}

TEST(DecodeCost, ExpertParallelRanksSeeEveryRanksTokens) {
  const ModelConfig c = tiny();
  const ModelWeights half = random_weights(c, WeightFormat{io::DType::kF32, false, false}, 3, at::kCPU, ExpertRange{0, 4});
  const double expert = 3.0 * 128 * 256 * 4;
  // 2 ranks of batch 1: 2 tokens reach each rank's 4 experts: 4 (1 - 0.75^2) expected per layer.
  const double with_one = DecodeCost(half, 1).step(1, 1).weight_bytes, with_two = DecodeCost(half, 2).step(1, 1).weight_bytes;
  EXPECT_NEAR(with_two - with_one, 6 * 4 * ((1 - 0.75 * 0.75) - 0.25) * expert, 1e-6);
}

TEST(DecodeCost, StateAndAttentionFollowTheContext) {
  const ModelConfig c = tiny();  // window 128, head_dim 64, 8 heads; ratios 0 0 4 128 4 128; index 16 x 32, top-16
  const ModelWeights weights = random_weights(c, WeightFormat{io::DType::kF32, false, false}, 3, at::kCPU);
  const DecodeCost cost(weights, 1);
  // From context 1024 to 2048 the window stays 128 rows; per sequence HCA adds 8 entries (2 layers),
  // CSA adds 256 indexer keys and keeps 16 picks (2 layers).
  const double state = cost.step(1, 2048).state_bytes - cost.step(1, 1024).state_bytes;
  EXPECT_NEAR(state, (2 * 8 * 64 + 2 * 256 * 32) * 4.0, 1e-6);
  // Attention FLOPs: 2 x 2 x 8 heads x 64 per key (the HCA layers' 8 more), indexer 2 x 16 x 32 per entry.
  const double flops = cost.step(1, 2048).flops - cost.step(1, 1024).flops;
  EXPECT_NEAR(flops, 2 * 8 * (2 * 2 * 8 * 64) + 2 * 256 * (2 * 16 * 32), 1e-6);
  EXPECT_GT(cost.step(1, 1).floor_ms(4.3e12, 790e12), 0.0);
}

}  // namespace
}  // namespace deepinfer::model
