// The paged, chunked forward against a one-shot forward, and the one-shot forward against an
// independent dense reference (tests/model/dense_reference.cpp). fp32 on CPU.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "model/deepseek_v4_model.h"
#include "model/random_weights.h"
#include "tests/model/dense_reference.h"
#include "tests/model/forward_test_util.h"

namespace deepinfer::model::testing {
namespace {

constexpr double kTolerance = 1e-4;
const WeightFormat kF32{io::DType::kF32, false, false};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string source_dir() {
  const char* dir = std::getenv("DEEPINFER_SOURCE_DIR");
  return dir != nullptr ? dir : ".";
}

struct Fixture {
  explicit Fixture(const ModelConfig& config, uint64_t seed = 7)
      : weights(random_weights(config, kF32, seed, at::kCPU)),
        model(weights, comm, model_options(Arithmetic::official(), /*query_tile=*/64)) {}
  ModelCache cache(int64_t blocks, int64_t slots) const {
    return ModelCache(weights.config(), ModelCache::Options{blocks, slots, at::kFloat, at::kCPU});
  }
  ModelWeights weights;
  SingleRankCommunicator comm;
  DeepseekV4Model model;
};

// Three sequences of 260, 200, 150 tokens on the fast variant (window 16, CSA 4, HCA 16):
// chunk sizes that straddle windows of 4 and 16 and 128-token blocks, then decode.
std::vector<SeqPlan> fast_plans(const ModelConfig& config, int64_t num_blocks) {
  const std::vector<int64_t> lengths{260, 200, 150};
  const auto blocks = shuffled_blocks({blocks_for(260), blocks_for(200), blocks_for(150)}, num_blocks, /*seed=*/3);
  std::vector<SeqPlan> plans{
      {random_tokens(lengths[0], config.vocab_size, 11), {5, 18, 3, 1, 30, 77, 16}, 5, blocks[0]},
      {random_tokens(lengths[1], config.vocab_size, 12), {16, 16, 2, 100}, 2, blocks[1]},
      {random_tokens(lengths[2], config.vocab_size, 13), {1, 33, 7, 64}, 7, blocks[2]},
  };
  return plans;
}

// The same sequences with other (still shuffled) blocks and slots, for the one-shot run.
std::vector<SeqPlan> relocated(std::vector<SeqPlan> plans, int64_t num_blocks) {
  std::vector<int64_t> per_seq;
  for (const SeqPlan& p : plans) per_seq.push_back(static_cast<int64_t>(p.blocks.size()));
  const auto blocks = shuffled_blocks(per_seq, num_blocks, /*seed=*/99);
  for (size_t i = 0; i < plans.size(); ++i) {
    plans[i].blocks = blocks[i];
    plans[i].slot = static_cast<int32_t>(plans.size() - i);
  }
  return plans;
}

void check_non_degenerate(const at::Tensor& logits) {
  EXPECT_GT(logits.std().item<double>(), 0.1);
  // Different positions give different distributions.
  EXPECT_GT((logits[0] - logits[logits.size(0) - 1]).abs().max().item<double>(), 0.1);
}

TEST(ForwardConsistency, FastVariantChunkedAndDecodeMatchOneShot) {
  const ModelConfig config = tiny_fast_test_config();
  Fixture f(config);
  constexpr int64_t kBlocks = 16;
  const auto plans = fast_plans(config, kBlocks);
  ModelCache one_shot_cache = f.cache(kBlocks, 9);
  auto start = std::chrono::steady_clock::now();
  const auto one_shot = run_one_shot(f.model, relocated(plans, kBlocks), one_shot_cache);
  const double one_shot_s = seconds_since(start);
  ModelCache cache = f.cache(kBlocks, 9);
  int64_t steps = 0;
  start = std::chrono::steady_clock::now();
  const auto incremental = run_incremental(f.model, plans, cache, &steps);
  const double diff = max_abs_diff(one_shot, incremental);
  std::printf(
      "[fast variant] chunked+decode vs one-shot: 3 sequences (260/200/150 tokens), %ld steps, max |diff| = %.3g"
      " (one-shot %.2f s, incremental %.2f s)\n",
      static_cast<long>(steps), diff, one_shot_s, seconds_since(start));
  EXPECT_LT(diff, kTolerance);
  for (const auto& l : one_shot) check_non_degenerate(l);

  // Negative control: two sequences sharing a state slot must break the equality (checked on
  // 90-token prefixes: logits of a prefix do not depend on later tokens).
  std::vector<SeqPlan> clashing{plans[0], plans[1]};
  std::vector<at::Tensor> expected;
  for (size_t i = 0; i < clashing.size(); ++i) {
    clashing[i].tokens.resize(90);
    expected.push_back(one_shot[i].narrow(0, 0, 90));
  }
  clashing[1].slot = clashing[0].slot;
  ModelCache clash_cache = f.cache(kBlocks, 9);
  const double clash = max_abs_diff(expected, run_incremental(f.model, clashing, clash_cache));
  std::printf("[fast variant] negative control (shared state slot): max |diff| = %.3g\n", clash);
  EXPECT_GT(clash, 1e-2);
}

TEST(ForwardConsistency, FastVariantOneShotMatchesDenseReference) {
  ModelConfig config = tiny_fast_test_config();
  // Real top-k selection on a 260-token sequence, then every entry selected on a 150-token one.
  for (const auto& [topk, seq] : {std::pair<int64_t, size_t>{config.index_topk, 0}, std::pair<int64_t, size_t>{1000, 2}}) {
    config.index_topk = topk;
    Fixture f(config);
    constexpr int64_t kBlocks = 16;
    const SeqPlan plan = relocated(fast_plans(config, kBlocks), kBlocks)[seq];
    ModelCache cache = f.cache(kBlocks, 9);
    const at::Tensor one_shot = run_one_shot(f.model, {plan}, cache)[0];
    const at::Tensor reference = dense_reference_logits(f.weights, plan.tokens);
    const double diff = (one_shot - reference).abs().max().item<double>();
    std::printf("[fast variant, index_topk %ld] one-shot vs dense reference (%zu tokens): max |diff| = %.3g (max |logit| %.3g)\n",
                static_cast<long>(topk), plan.tokens.size(), diff, reference.abs().max().item<double>());
    EXPECT_LT(diff, kTolerance);
  }
}

TEST(ForwardConsistency, TinyConfig300TokensChunkedDecodeOneShotAndReference) {
  const ModelConfig config = load_model_config(source_dir() + "/configs/models/tiny.json");
  Fixture f(config, /*seed=*/21);
  constexpr int64_t kBlocks = 12;
  const auto blocks = shuffled_blocks({3, 3}, kBlocks, /*seed=*/5);
  // Chunks cross the 128-token window/HCA boundary inside a chunk (37 | 100 | 130) and exactly
  // at it (128 | 1 | 127), then token-by-token decode; the two sequences share every batch.
  const std::vector<SeqPlan> plans{
      {random_tokens(310, config.vocab_size, 31), {37, 100, 130}, 3, blocks[0]},
      {random_tokens(300, config.vocab_size, 32), {128, 1, 127, 4}, 6, blocks[1]},
  };
  ModelCache one_shot_cache = f.cache(kBlocks, 8);
  const auto one_shot = run_one_shot(f.model, relocated(plans, kBlocks), one_shot_cache);
  ModelCache cache = f.cache(kBlocks, 8);
  int64_t steps = 0;
  const auto incremental = run_incremental(f.model, plans, cache, &steps);
  const double diff = max_abs_diff(one_shot, incremental);
  std::printf("[tiny config] chunked+decode vs one-shot: 2 sequences (310/300 tokens), %ld steps, max |diff| = %.3g\n",
              static_cast<long>(steps), diff);
  EXPECT_LT(diff, kTolerance);
  const at::Tensor reference = dense_reference_logits(f.weights, plans[1].tokens);
  const double ref_diff = (reference - one_shot[1]).abs().max().item<double>();
  std::printf("[tiny config] one-shot vs dense reference (300 tokens): max |diff| = %.3g (max |logit| %.3g)\n", ref_diff,
              reference.abs().max().item<double>());
  EXPECT_LT(ref_diff, kTolerance);
  check_non_degenerate(one_shot[1]);
}

}  // namespace
}  // namespace deepinfer::model::testing
