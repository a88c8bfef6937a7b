// The FP4 expert kernels (model/cuda/moe_fp4_gemm.h, through ExpertWorkspace::routed_partial)
// against the dequantize-then-at::_grouped_mm path (routed_partial_dequantized), label cuda;
// each test skips with a message without a GPU:
//  - over shapes: k = 1..8; tiny (D 256, I 128, 32 experts) and the real dimensions (D 4096,
//    I 2048, 256 experts); 1, 7, 64, 300 and 4096 tokens; uniform and skewed routings (ragged
//    per-expert counts with zeros, experts with > 64 rows, all experts hit); all experts owned or
//    a subrange (expert parallelism: the others' pairs add nothing); with and without the clamp.
//    Bound: ||out - ref|| / ||ref|| <= 1e-2, no NaN, every element written (the allocator's
//    blocks are filled with NaN before each run);
//  - a pair's bits do not depend on the batch: a token alone equals the same token among 1..512
//    other rows, as many of them routed to its experts as makes its experts' tiles decode-sized
//    (<= 8 rows) or prefill-sized, at any position.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <limits>
#include <random>
#include <vector>

#include "model/moe_grouped.h"
#include "model/torch_compat.h"
#include "tests/model/fp4_experts_fixture.h"

namespace deepinfer::model::testing {
namespace {

// Fills free blocks of the caching allocator with NaN: whatever the next allocations reuse
// starts poisoned, so an element the kernels do not write shows.
void poison_allocator(int64_t bytes, at::Device device) {
  at::Tensor poison = at::full({bytes / 4}, std::numeric_limits<float>::quiet_NaN(), at::TensorOptions().dtype(at::kFloat).device(device));
  (void)poison;
}

struct Case {
  int64_t hidden, intermediate, experts, k;
  int64_t tokens;
  ExpertRange owned;  // {0, 0}: all
  int64_t hot;        // > 0: skewed routing towards the first `hot` experts
  double limit = 10.0;
};

class MoeFp4Cuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: the FP4 expert kernels run only on CUDA";
    if (!compat::kHasGroupedMm) GTEST_SKIP() << "the reference (at::_grouped_mm) needs LibTorch >= 2.8";
  }
  const at::Device cuda_{at::kCUDA, 0};
};

// ||out - ref|| / ||ref|| of the kernels against the dequantizing path, for one case
// (||out - ref|| where the reference is all zero).
double relative_error(const Case& c, const ModelWeights& weights, const Routing& r, at::Device device) {
  ExpertWorkspace workspace;
  EXPECT_TRUE(workspace.usable(weights, 0, r.x));
  const at::Tensor ref = workspace.routed_partial_dequantized(weights, 0, r.x, r.experts, r.weights);
  poison_allocator(r.x.size(0) * c.k * (c.hidden * 16 + c.intermediate * 2) + (int64_t{64} << 20), device);
  const at::Tensor out = workspace.routed_partial(weights, 0, r.x, r.experts, r.weights);
  EXPECT_EQ(out.sizes(), ref.sizes());
  EXPECT_FALSE(out.isnan().any().item<bool>()) << "unwritten or NaN elements";
  const double norm = ref.norm().item<double>(), diff = (out - ref).norm().item<double>();
  // No pair routed to an owned expert (possible for a few tokens and a subrange of experts): the
  // partial is exactly zero, and so must the kernels' be.
  if (norm == 0.0) return diff;
  return diff / norm;
}

void run_cases(const std::vector<Case>& cases, at::Device device) {
  for (const Case& c : cases) {
    const ModelConfig config = expert_config(c.hidden, c.intermediate, c.experts, c.k, c.limit);
    const ExpertRange owned = c.owned.size() > 0 ? c.owned : ExpertRange{0, c.experts};
    const ModelWeights weights = random_fp4_experts(config, owned, /*seed=*/c.hidden + 31 * c.k + c.experts, device);
    at::Generator gen = cuda::make_generator(/*seed=*/1000 + c.tokens * 7 + c.k, device);
    const Routing r = random_routing(c.tokens, c.hidden, c.experts, c.k, c.hot, gen, device);
    const double error = relative_error(c, weights, r, device);
    std::cout << "[moe_fp4] D " << c.hidden << ", I " << c.intermediate << ", experts [" << owned.first << ", " << owned.last << ") of "
              << c.experts << ", k " << c.k << ", " << c.tokens << " tokens, " << (c.hot > 0 ? "skewed" : "uniform") << ", limit "
              << c.limit << ": |out - ref| / |ref| " << error << std::endl;
    EXPECT_LE(error, 1e-2) << "D " << c.hidden << " k " << c.k << " tokens " << c.tokens;
  }
}

TEST_F(MoeFp4Cuda, TinyShapesMatchTheDequantizingPath) {
  std::vector<Case> cases;
  for (int64_t k = 1; k <= 8; ++k) {
    for (int64_t tokens : {int64_t{1}, int64_t{7}, int64_t{64}, int64_t{300}}) {
      cases.push_back({256, 128, 32, k, tokens, {}, 0});
      cases.push_back({256, 128, 32, k, tokens, {5, 21}, 0});
      cases.push_back({256, 128, 32, k, tokens, {}, /*hot=*/k});  // a few experts get most rows (> 64 each at 300 tokens)
    }
  }
  cases.push_back({256, 128, 32, 4, 300, {}, 0, /*limit=*/0.0});
  cases.push_back({384, 256, 16, 3, 300, {3, 11}, 2});
  cases.push_back({128, 384, 8, 8, 64, {}, 0});  // every expert in every row
  run_cases(cases, cuda_);
}

TEST_F(MoeFp4Cuda, RealShapesMatchTheDequantizingPath) {
  std::vector<Case> cases;
  for (int64_t tokens : {int64_t{1}, int64_t{7}, int64_t{64}, int64_t{300}, int64_t{4096}}) {
    cases.push_back({4096, 2048, 256, 6, tokens, {}, 0});
    cases.push_back({4096, 2048, 256, 6, tokens, {64, 192}, 0});
  }
  cases.push_back({4096, 2048, 256, 6, 4096, {}, /*hot=*/8});  // 8 experts with ~3,000 rows each
  cases.push_back({4096, 2048, 256, 1, 64, {}, 0});
  cases.push_back({4096, 2048, 256, 8, 300, {0, 32}, 0});
  run_cases(cases, cuda_);
}

// A probe token alone, then among m other rows of which `shared` carry one of its experts in
// their first slot (its experts' tiles: decode-sized while <= 8 rows, prefill-sized beyond),
// the probe at a random position: its output row must not change a bit.
void check_batch_invariance(int64_t hidden, int64_t intermediate, int64_t experts, int64_t k, at::Device device) {
  const ModelConfig config = expert_config(hidden, intermediate, experts, k);
  const ModelWeights weights = random_fp4_experts(config, {0, experts}, /*seed=*/77, device);
  ExpertWorkspace workspace;
  at::Generator gen = cuda::make_generator(/*seed=*/5, device);
  const Routing probe = random_routing(1, hidden, experts, k, 0, gen, device);
  const at::Tensor alone = workspace.routed_partial(weights, 0, probe.x, probe.experts, probe.weights);
  ASSERT_FALSE(alone.isnan().any().item<bool>());
  const at::Tensor probe_ids = probe.experts.cpu();
  std::mt19937 rng(11);
  struct Group {
    int64_t others, shared;
  };
  for (const Group& g : {Group{1, 0}, Group{1, 1}, Group{7, 7}, Group{8, 8}, Group{9, 3}, Group{40, 20}, Group{63, 63}, Group{64, 64},
                         Group{100, 70}, Group{200, 130}, Group{300, 0}, Group{511, 200}, Group{512, 511}}) {
    const Routing others = random_routing(g.others, hidden, experts, k, 0, gen, device);
    // The first `shared` rows take one of the probe's experts in slot 0 (a row may then name an
    // expert twice: two pairs, which the kernels take like any others).
    at::Tensor ids = others.experts.cpu();
    for (int64_t i = 0; i < g.shared; ++i) ids[i][0] = probe_ids[0][i % k];
    // The probe goes in at a random row.
    const int64_t place = std::uniform_int_distribution<int64_t>(0, g.others)(rng);
    const auto with_probe = [&](const at::Tensor& rest, const at::Tensor& row) {
      return at::cat({rest.narrow(0, 0, place), row, rest.narrow(0, place, g.others - place)}).contiguous();
    };
    const at::Tensor x = with_probe(others.x, probe.x), e = with_probe(ids.to(device), probe.experts),
                     w = with_probe(others.weights, probe.weights);
    const at::Tensor batch = workspace.routed_partial(weights, 0, x, e, w);
    EXPECT_TRUE(at::equal(batch[place], alone[0])) << "D " << hidden << ", k " << k << ": the probe among " << g.others << " rows ("
                                                   << g.shared << " on its experts) at row " << place << " differs from the probe alone";
  }
}

TEST_F(MoeFp4Cuda, APairsBitsDoNotDependOnTheBatch) {
  check_batch_invariance(256, 128, 16, 2, cuda_);
  check_batch_invariance(256, 128, 16, 6, cuda_);
  check_batch_invariance(4096, 2048, 256, 6, cuda_);
}

}  // namespace
}  // namespace deepinfer::model::testing
