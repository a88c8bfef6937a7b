// ModelRunner on CUDA (label cuda; each test skips with a message without a GPU), the fast tiny
// model with random weights in bfloat16:
//  - execute() never waits for the device: whole steps (prefill, eager decode, decode replayed
//    from a CUDA graph) under PyTorch's sync debug mode set to error, where any synchronizing
//    call (a blocking copy, .item(), nonzero, a stream synchronize) throws;
//  - decode steps replayed from CUDA graphs give the same tokens and logprobs, bit for bit, as the
//    same steps run eagerly (--no-cuda-graphs), greedy and sampled rows, batches that change bucket.
#include <gtest/gtest.h>

#include <vector>

#include "engine/model_runner.h"
#include "model/expert_parallel.h"
#include "model/random_weights.h"
#include "tests/engine/runner_steps.h"
#include "tests/testing/sync_debug_error.h"

namespace deepinfer::engine {
namespace {

using deepinfer::testing::SyncDebugError;
using runner_steps::row_of;
using runner_steps::step_of;

struct CudaRunner {
  explicit CudaRunner(const model::ModelWeights& weights, bool graphs)
      : runner(weights, comm,
               {.num_blocks = 64,
                .num_slots = 33,
                .dtype = at::kBFloat16,
                .device = at::Device(at::kCUDA, 0),
                .model = {},
                .cuda_graphs = graphs,
                .max_blocks_per_seq = 4,
                .debug_logits_path = {}}) {}
  model::SingleRankCommunicator comm;
  ModelRunner runner;
};

model::ModelWeights tiny_weights() {
  return model::random_weights(model::tiny_fast_test_config(), model::WeightFormat{io::DType::kBF16, false, false}, /*seed=*/5,
                               at::Device(at::kCUDA, 0));
}

TEST(ModelRunnerCuda, StepsNeverWaitForTheDevice) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: the no-sync property is unverified";
  const model::ModelWeights weights = tiny_weights();
  CudaRunner t(weights, /*graphs=*/true);
  // Warm-up (unguarded): the prefill, then a decode key seen once (eager) and once more (captured:
  // a capture synchronizes the device on purpose, once per key).
  std::vector<std::unique_ptr<PendingStep>> pending;
  pending.push_back(t.runner.execute(step_of(0, 5, 0)));
  for (int32_t g = 1; g <= 2; ++g) pending.push_back(t.runner.execute(step_of(g, 5, g)));
  for (auto& p : pending) p->wait();
  pending.clear();
  {
    const SyncDebugError guard;
    // Replays (the graph of 5 rows in the bucket of 8), then a new sequence's prefill (eager).
    for (int32_t g = 3; g <= 6; ++g) EXPECT_NO_THROW(pending.push_back(t.runner.execute(step_of(g, 5, g))));
    SchedulerOutput late = step_of(7, 5, 7);
    late.kind = StepKind::kPrefill;
    late.seqs.push_back(row_of(5, 0));
    EXPECT_NO_THROW(pending.push_back(t.runner.execute(late)));
  }
  ASSERT_EQ(pending.size(), 5u);
  for (std::size_t i = 0; i < pending.size(); ++i) EXPECT_EQ(pending[i]->wait().result.tokens.size(), i < 4 ? 5u : 6u);
  EXPECT_GE(t.runner.graph_stats().replayed, 4);
}

TEST(ModelRunnerCuda, GraphsReplayTheEagerStepsBitForBit) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: graphs run only on CUDA";
  const model::ModelWeights weights = tiny_weights();
  CudaRunner eager(weights, /*graphs=*/false), graphed(weights, /*graphs=*/true);
  // Sequences 0..4 (the bucket of 8) for 10 decode steps, then 0..2 (the bucket of 4) for 10 more:
  // each key is run eagerly, captured, then replayed. 21 + 20 positions stay within one block.
  for (int32_t g = 0; g <= 20; ++g) {
    const SchedulerOutput out = step_of(g, g <= 10 ? 5 : 3, g);
    const ExecutedStep a = eager.runner.execute(out)->wait();
    const ExecutedStep b = graphed.runner.execute(out)->wait();
    ASSERT_EQ(a.result.tokens.size(), b.result.tokens.size());
    ASSERT_EQ(a.logprobs.size(), b.logprobs.size());
    for (std::size_t i = 0; i < a.result.tokens.size(); ++i) {
      EXPECT_EQ(a.result.tokens[i].token_id, b.result.tokens[i].token_id) << "step " << g << " row " << i;
      if (a.logprobs.empty() || !a.logprobs[i]) continue;
      ASSERT_TRUE(b.logprobs[i].has_value());
      EXPECT_EQ(a.logprobs[i]->logprob, b.logprobs[i]->logprob) << "step " << g << " row " << i;
      EXPECT_EQ(a.logprobs[i]->top_ids, b.logprobs[i]->top_ids);
      EXPECT_EQ(a.logprobs[i]->top_logprobs, b.logprobs[i]->top_logprobs);
    }
  }
  EXPECT_EQ(eager.runner.graph_stats().replayed, 0);
  EXPECT_GE(graphed.runner.graph_stats().captured, 2);
  EXPECT_GE(graphed.runner.graph_stats().replayed, 16);  // 9 + 9: all but each key's first two steps
}

}  // namespace
}  // namespace deepinfer::engine
