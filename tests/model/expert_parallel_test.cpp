// Expert parallelism through the ExpertCommunicator interface: two ranks in one process (threads
// and a barrier) each holding half the routed experts must reproduce the single-rank MoE and the
// single-rank model, also when one rank brings no tokens.
#include <gtest/gtest.h>

#include <barrier>
#include <thread>

#include "model/deepseek_v4_model.h"
#include "model/expert_parallel.h"
#include "model/moe.h"
#include "model/random_weights.h"
#include "tests/model/forward_test_util.h"

namespace deepinfer::model::testing {
namespace {

const WeightFormat kF32{io::DType::kF32, false, false};

// A world of `size` threads exchanging tensors through shared slots.
class ThreadCommunicator final : public ExpertCommunicator {
 public:
  struct World {
    explicit World(int64_t size) : barrier(size), slots(size) {}
    std::barrier<> barrier;
    std::vector<at::Tensor> slots;
  };
  ThreadCommunicator(World& world, int64_t rank) : world_(world), rank_(rank) {}
  int64_t rank() const override { return rank_; }
  int64_t world_size() const override { return static_cast<int64_t>(world_.slots.size()); }

  at::Tensor all_gather_rows(const at::Tensor& local, std::vector<int64_t>& counts) override {
    world_.slots[rank_] = local;
    world_.barrier.arrive_and_wait();
    counts.clear();
    for (const at::Tensor& t : world_.slots) counts.push_back(t.size(0));
    at::Tensor out = at::cat(world_.slots, 0);
    world_.barrier.arrive_and_wait();
    return out;
  }

  at::Tensor reduce_scatter_rows(const at::Tensor& full, const std::vector<int64_t>& counts) override {
    world_.slots[rank_] = full;
    world_.barrier.arrive_and_wait();
    at::Tensor sum = world_.slots[0].clone();
    for (size_t r = 1; r < world_.slots.size(); ++r) sum += world_.slots[r];
    int64_t offset = 0;
    for (int64_t r = 0; r < rank_; ++r) offset += counts[r];
    at::Tensor out = sum.narrow(0, offset, counts[rank_]).clone();
    world_.barrier.arrive_and_wait();
    return out;
  }

 private:
  World& world_;
  int64_t rank_;
};

TEST(ExpertParallel, RangesPartitionTheExperts) {
  EXPECT_EQ(expert_range_for_rank(8, 0, 3).first, 0);
  EXPECT_EQ(expert_range_for_rank(8, 0, 3).last, 3);
  EXPECT_EQ(expert_range_for_rank(8, 1, 3).last, 6);
  EXPECT_EQ(expert_range_for_rank(8, 2, 3).last, 8);
  EXPECT_THROW(expert_range_for_rank(2, 0, 4), c10::Error);
}

TEST(ExpertParallel, TwoRanksMatchOneRankIncludingAnEmptyRank) {
  const ModelConfig config = tiny_fast_test_config();
  const ModelWeights full = random_weights(config, kF32, /*seed=*/5, at::kCPU);
  const ModelWeights half0 = random_weights(config, kF32, 5, at::kCPU, expert_range_for_rank(8, 0, 2));
  const ModelWeights half1 = random_weights(config, kF32, 5, at::kCPU, expert_range_for_rank(8, 1, 2));
  EXPECT_THROW(half0.expert_matrix(3, 6, "w1"), c10::Error);  // not held by rank 0
  at::Generator gen = at::detail::createCPUGenerator(1);
  for (int64_t rows1 : {int64_t{0}, int64_t{9}}) {
    const at::Tensor x0 = at::randn({13, config.hidden_size}, gen), x1 = at::randn({rows1, config.hidden_size}, gen);
    const at::Tensor ids0 = at::randint(config.vocab_size, {13}, gen), ids1 = at::randint(config.vocab_size, {rows1}, gen);
    for (int64_t layer : {int64_t{0}, int64_t{4}}) {  // hash-routed and score-routed
      SingleRankCommunicator single;
      const at::Tensor want0 = moe_forward(full, layer, x0, ids0, single, Arithmetic::official());
      const at::Tensor want1 = moe_forward(full, layer, x1, ids1, single, Arithmetic::official());
      ThreadCommunicator::World world(2);
      at::Tensor got0, got1;
      std::thread rank1([&] {
        ThreadCommunicator comm(world, 1);
        got1 = moe_forward(half1, layer, x1, ids1, comm, Arithmetic::official());
      });
      ThreadCommunicator comm0(world, 0);
      got0 = moe_forward(half0, layer, x0, ids0, comm0, Arithmetic::official());
      rank1.join();
      EXPECT_LT((got0 - want0).abs().max().item<double>(), 1e-5) << "layer " << layer << " rows1 " << rows1;
      ASSERT_EQ(got1.size(0), rows1);
      if (rows1 > 0) {
        EXPECT_LT((got1 - want1).abs().max().item<double>(), 1e-5) << "layer " << layer;
      }
    }
  }
}

// The batch-invariant arithmetic sums a token's k slots after the exchange, in slot order: two
// ranks give the bits of one rank (the official arithmetic adds each rank's partial sum, so with
// k = 6 over two ranks its bits move: the control). Rank 1 brings no tokens but owns half the
// experts, so every GEMM (router, experts, shared expert) sees the rows it sees on one rank: the
// CPU's GEMMs round by row count, which this test is not about.
TEST(ExpertParallel, TwoRanksGiveOneRanksBitsInTheBatchInvariantMode) {
  ModelConfig config = tiny_fast_test_config();
  config.num_experts_per_tok = 6;
  config.validate();
  const ModelWeights full = random_weights(config, kF32, 5, at::kCPU);
  const ModelWeights half0 = random_weights(config, kF32, 5, at::kCPU, expert_range_for_rank(8, 0, 2));
  const ModelWeights half1 = random_weights(config, kF32, 5, at::kCPU, expert_range_for_rank(8, 1, 2));
  at::Generator gen = at::detail::createCPUGenerator(2);
  const at::Tensor x0 = at::randn({13, config.hidden_size}, gen), x1 = at::randn({0, config.hidden_size}, gen);
  const at::Tensor ids0 = at::randint(config.vocab_size, {13}, gen), ids1 = at::randint(config.vocab_size, {0}, gen);
  for (const Arithmetic* arith : {&Arithmetic::batch_invariant(), &Arithmetic::official()}) {
    const bool invariant = arith == &Arithmetic::batch_invariant();
    for (int64_t layer : {int64_t{0}, int64_t{4}}) {  // hash-routed and score-routed
      SingleRankCommunicator single;
      const at::Tensor want = moe_forward(full, layer, x0, ids0, single, *arith);
      ThreadCommunicator::World world(2);
      at::Tensor got0, got1;
      std::thread rank1([&] {
        ThreadCommunicator comm(world, 1);
        got1 = moe_forward(half1, layer, x1, ids1, comm, *arith);
      });
      ThreadCommunicator comm0(world, 0);
      got0 = moe_forward(half0, layer, x0, ids0, comm0, *arith);
      rank1.join();
      const bool same = at::equal(at::cat({got0, got1}), want);
      if (invariant) {
        EXPECT_TRUE(same) << "layer " << layer << ": max |diff| " << (at::cat({got0, got1}) - want).abs().max().item<double>();
      } else {
        EXPECT_FALSE(same) << "layer " << layer << ": the official sums should group by rank (the control)";
        EXPECT_LT((at::cat({got0, got1}) - want).abs().max().item<double>(), 1e-5);
      }
    }
  }
}

TEST(ExpertParallel, TwoRankModelMatchesSingleRankModel) {
  const ModelConfig config = tiny_fast_test_config();
  const ModelWeights full = random_weights(config, kF32, 5, at::kCPU);
  std::vector<ModelWeights> halves;
  for (int64_t r = 0; r < 2; ++r) halves.push_back(random_weights(config, kF32, 5, at::kCPU, expert_range_for_rank(8, r, 2)));
  // Each rank runs its own sequences (different token counts) with its own cache.
  const std::vector<SeqPlan> plans{{random_tokens(40, config.vocab_size, 1), {40}, 1, {1}},
                                   {random_tokens(7, config.vocab_size, 2), {7}, 2, {2}}};
  SingleRankCommunicator single;
  const DeepseekV4Model reference(full, single, {});
  std::vector<at::Tensor> want;
  for (const SeqPlan& plan : plans) {
    ModelCache cache(config, {4, 4, at::kFloat, at::kCPU});
    want.push_back(run_one_shot(reference, {plan}, cache)[0]);
  }
  ThreadCommunicator::World world(2);
  std::vector<at::Tensor> got(2);
  auto run_rank = [&](int64_t r) {
    ThreadCommunicator comm(world, r);
    const DeepseekV4Model model(halves[r], comm, {});
    ModelCache cache(config, {4, 4, at::kFloat, at::kCPU});
    got[r] = run_one_shot(model, {plans[r]}, cache)[0];
  };
  std::thread rank1(run_rank, 1);
  run_rank(0);
  rank1.join();
  for (int r = 0; r < 2; ++r) EXPECT_LT((got[r] - want[r]).abs().max().item<double>(), 1e-4) << "rank " << r;
}

}  // namespace
}  // namespace deepinfer::model::testing
