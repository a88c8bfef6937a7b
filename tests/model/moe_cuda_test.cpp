// The grouped MoE path on CUDA (moe_grouped.h) against the per-expert loop (moe.cpp) on the
// same weights and inputs: packed FP4 and dense bfloat16 experts, hash- and score-routed
// layers, all experts and half of them (the pairs of the other rank's experts must contribute
// nothing), and zero tokens.
#include <gtest/gtest.h>

#include "model/moe.h"
#include "model/random_weights.h"

namespace deepinfer::model {
namespace {

TEST(MoeCuda, GroupedMatchesLoop) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: the grouped path runs only on CUDA";
  const ModelConfig config = tiny_fast_test_config();
  const at::Device cuda(at::kCUDA, 0);
  for (bool fp4 : {true, false})
  for (const std::optional<ExpertRange>& range : {std::optional<ExpertRange>{}, std::optional<ExpertRange>{ExpertRange{2, 6}}}) {
    const WeightFormat format{io::DType::kBF16, /*fp8_linears=*/false, /*fp4_experts=*/fp4};
    const ModelWeights weights = random_weights(config, format, /*seed=*/11, cuda, range);
    ExpertWorkspace workspace;
    SingleRankCommunicator comm;
    at::Generator gen = at::detail::createCPUGenerator(4);
    for (int64_t tokens : {int64_t{0}, int64_t{1}, int64_t{57}}) {
      const at::Tensor x = at::randn({tokens, config.hidden_size}, gen).to(cuda, at::kBFloat16);
      const at::Tensor ids = at::randint(config.vocab_size, {tokens}, gen).to(cuda);
      for (int64_t layer : {int64_t{0}, int64_t{4}}) {  // hash-routed and score-routed
        if (tokens > 0) ASSERT_TRUE(workspace.usable(weights, layer, x)) << "the grouped path should apply (CUDA build, LibTorch >= 2.8)";
        const at::Tensor grouped = moe_forward(weights, layer, x, ids, comm, &workspace).to(at::kFloat).cpu();
        const at::Tensor loop = moe_forward(weights, layer, x, ids, comm).to(at::kFloat).cpu();
        ASSERT_EQ(grouped.sizes(), loop.sizes());
        if (tokens == 0) continue;
        const double diff = (grouped - loop).abs().max().item<double>();
        const double scale = loop.abs().max().item<double>();
        std::cout << "[moe_cuda] " << (fp4 ? "FP4" : "bf16") << " experts " << (range ? "[2, 6)" : "all") << ", layer " << layer << ", " << tokens
                  << " tokens: max |grouped - loop| " << diff << " (max |loop| " << scale << ")" << std::endl;
        EXPECT_TRUE(grouped.isfinite().all().item<bool>());
        EXPECT_LE(diff, 0.02 * scale + 1e-3);
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer::model
