// The memory plan: its parts equal what is then allocated, and a plan that does not fit says
// what to change (fewer blocks, or more ranks for the real V4-Flash shape on 141 GB GPUs).
#include "pipeline/memory_plan.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "model/model_cache.h"
#include "model/model_config.h"
#include "model/random_weights.h"
#include "model/weights.h"

namespace deepinfer::pipeline {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

std::string source_dir() {
  const char* dir = std::getenv("DEEPINFER_SOURCE_DIR");
  return dir != nullptr ? dir : ".";
}

int64_t allocated_bytes(const model::ModelWeights& weights) {
  int64_t total = 0;
  for (const std::string& name : weights.names()) total += weights.get(name).nbytes();
  return total;
}

JobConfig job(int32_t num_blocks, int32_t max_num_seqs = 16) {
  JobConfig c;
  c.num_blocks = num_blocks;
  c.max_num_seqs = max_num_seqs;
  c.max_num_batched_tokens = 512;
  c.max_model_len = 2048;
  return c;
}

TEST(MemoryPlanTest, WeightsAndStateAreWhatIsAllocated) {
  const auto config = model::load_model_config(source_dir() + "/configs/models/tiny.json");
  struct Case {
    model::WeightFormat format;
    at::ScalarType dtype;
    int rank, world_size;
  };
  const model::WeightFormat fp4{.dense_dtype = io::DType::kBF16, .fp8_linears = true, .fp4_experts = true};
  for (const Case& c : {Case{{}, at::kFloat, 0, 1}, Case{fp4, at::kBFloat16, 0, 1}, Case{fp4, at::kBFloat16, 1, 3}}) {
    SCOPED_TRACE(std::to_string(c.rank) + " of " + std::to_string(c.world_size));
    const auto experts = model::expert_range_for_rank(config.n_routed_experts, c.rank, c.world_size);
    const auto weights = model::random_weights(config, c.format, 1, at::kCPU, experts);
    const ModelLayout layout{config, c.format, experts};
    const EngineOptions engine = engine_options(job(64), config, c.dtype, at::kCPU);
    const MemoryPlan plan = plan_memory(layout, engine, c.rank, c.world_size, 64 * kGiB);
    EXPECT_EQ(plan.weights(), allocated_bytes(weights));
    EXPECT_EQ(plan.experts_held, experts.size());
    EXPECT_GT(plan.expert_weights, 0);
    EXPECT_EQ(plan.expert_scratch, 0);  // no grouped path on the CPU
    const model::ModelCache cache(config, {.num_blocks = 64, .num_slots = 17, .dtype = c.dtype, .device = at::kCPU});
    EXPECT_EQ(plan.state(), cache.bytes());
    EXPECT_GT(plan.activations, 0);
    EXPECT_TRUE(plan.fits());
    EXPECT_EQ(advice(plan, layout, engine), "");
  }
}

TEST(MemoryPlanTest, TooManyBlocksAdvisesTheLargestCountThatFits) {
  const auto config = model::load_model_config(source_dir() + "/configs/models/tiny.json");
  const ModelLayout layout{config, {}, model::expert_range_for_rank(config.n_routed_experts, 0, 1)};
  const EngineOptions small = engine_options(job(64), config, at::kFloat, at::kCPU);
  const int64_t per_block = model::ModelCache::bytes_per_block(config, at::kFloat);
  // Room for exactly 100 blocks.
  const int64_t available = plan_memory(layout, small, 0, 1, 0).needed() + 36 * per_block;
  const EngineOptions big = engine_options(job(1000), config, at::kFloat, at::kCPU);
  const MemoryPlan plan = plan_memory(layout, big, 0, 1, available);
  EXPECT_FALSE(plan.fits());
  const std::string text = advice(plan, layout, big);
  EXPECT_NE(text.find("from 1000 to at most 100 "), std::string::npos) << text;
  EXPECT_TRUE(plan_memory(layout, engine_options(job(100), config, at::kFloat, at::kCPU), 0, 1, available).fits());
  EXPECT_FALSE(plan_memory(layout, engine_options(job(101), config, at::kFloat, at::kCPU), 0, 1, available).fits());
  EXPECT_NE(describe(plan).find("does not fit"), std::string::npos);
}

// The full V4-Flash shape in bfloat16 with FP4 routed experts on a 139 GiB GPU: one rank cannot
// hold its weights, two can (with the default job), and the advice says so.
TEST(MemoryPlanTest, FullV4FlashNeedsTwoRanks) {
  const auto config = model::load_model_config(source_dir() + "/configs/models/v4-flash.json");
  const model::WeightFormat format{.dense_dtype = io::DType::kBF16, .fp8_linears = true, .fp4_experts = true};
  const at::Device gpu(at::kCUDA, 0);
  JobConfig c = job(1024, 64);
  c.max_num_batched_tokens = 4096;
  c.max_model_len = 8192;
  const EngineOptions engine = engine_options(c, config, at::kBFloat16, gpu);
  const int64_t h200 = 139 * kGiB;
  const MemoryPlan one = plan_memory({config, format, model::expert_range_for_rank(256, 0, 1)}, engine, 0, 1, h200);
  EXPECT_FALSE(one.fits()) << describe(one);
  EXPECT_GT(one.weights(), 150 * kGiB) << describe(one);
  const std::string text = advice(one, {config, format, model::expert_range_for_rank(256, 0, 1)}, engine);
  EXPECT_NE(text.find("run at least 2 ranks (mpirun -np 2"), std::string::npos) << text;
  const MemoryPlan two = plan_memory({config, format, model::expert_range_for_rank(256, 0, 2)}, engine, 0, 2, h200);
  EXPECT_TRUE(two.fits()) << describe(two);
  EXPECT_EQ(two.experts_held, 128);
  std::printf("%s\n", describe(two).c_str());
}

// The CUDA graphs' pool (engine/decode_graphs.h): on CUDA, one rank and graphs on, the workspace
// of a decode step of the largest bucket (max_num_seqs 16: the bucket of 16); none without graphs,
// with several ranks, or on the CPU. The plan is arithmetic: no device is touched.
TEST(MemoryPlanTest, TheGraphsPoolIsCountedWhereGraphsRun) {
  const auto config = model::load_model_config(source_dir() + "/configs/models/tiny.json");
  const ModelLayout layout{config, {}, model::expert_range_for_rank(config.n_routed_experts, 0, 1)};
  const at::Device cuda(at::kCUDA, 0);
  const MemoryPlan on = plan_memory(layout, engine_options(job(64), config, at::kBFloat16, cuda), 0, 1, 64 * kGiB);
  EXPECT_GT(on.graph_pool, 0);
  EXPECT_LT(on.graph_pool, on.activations) << "16 decode rows against a 512-token step";
  EXPECT_EQ(on.needed(), on.weights() + on.expert_scratch + on.state() + on.activations + on.graph_pool + on.runtime_reserve);
  EXPECT_NE(describe(on).find("CUDA graphs"), std::string::npos);
  JobConfig off = job(64);
  off.cuda_graphs = false;
  EXPECT_EQ(plan_memory(layout, engine_options(off, config, at::kBFloat16, cuda), 0, 1, 64 * kGiB).graph_pool, 0);
  EXPECT_EQ(plan_memory(layout, engine_options(job(64), config, at::kBFloat16, cuda), 0, 2, 64 * kGiB).graph_pool, 0);
  const MemoryPlan cpu = plan_memory(layout, engine_options(job(64), config, at::kFloat, at::kCPU), 0, 1, 64 * kGiB);
  EXPECT_EQ(cpu.graph_pool, 0);
  EXPECT_EQ(describe(cpu).find("CUDA graphs"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer::pipeline
