// The transformers arithmetic (model/reference/transformers_arithmetic.h): rounding where
// transformers' bfloat16 forward rounds, for comparing with it (tests/reference/run_hf_reference.sh).
// In float32 it is the official forward up to the order of the mHC projection; in bfloat16 it
// rounds at other points, and its chunked / decode run still tracks its one-shot run. CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "model/deepseek_v4_model.h"
#include "model/hyper_connection.h"
#include "model/ops.h"
#include "model/random_weights.h"
#include "model/reference/transformers_arithmetic.h"
#include "tests/model/forward_test_util.h"

namespace deepinfer::model::testing {
namespace {

std::string source_dir() {
  const char* dir = std::getenv("DEEPINFER_SOURCE_DIR");
  return dir != nullptr ? dir : ".";
}

const Arithmetic& official_arith() { return Arithmetic::official(); }
const Arithmetic& transformers_arith() { return reference::transformers_arithmetic(); }

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  const at::ScalarType bits = a.element_size() == 4 ? at::kInt : at::kShort;
  return a.sizes() == b.sizes() && at::equal(a.contiguous().view(bits), b.contiguous().view(bits));
}

TEST(TransformersArithmetic, RmsNormRoundsTheNormalizedValueBeforeTheWeight) {
  at::manual_seed(5);
  const at::Tensor x = at::randn({9, 64}).to(at::kBFloat16), w = (at::rand({64}) + 0.5).to(at::kBFloat16);
  const at::Tensor xf = x.to(at::kFloat), inv = at::rsqrt(xf.pow(2).mean(-1, true) + 1e-6);
  EXPECT_TRUE(same_bits(transformers_arith().rms_norm(x, w, 1e-6), w * (xf * inv).to(at::kBFloat16)));
  EXPECT_TRUE(same_bits(transformers_arith().rms_norm(x, at::Tensor(), 1e-6), x * inv.to(at::kBFloat16)));
  EXPECT_TRUE(same_bits(rms_norm(x, w, 1e-6), (xf * inv * w.to(at::kFloat)).to(at::kBFloat16)));
  EXPECT_FALSE(same_bits(transformers_arith().rms_norm(x, w, 1e-6), rms_norm(x, w, 1e-6)));  // the two differ
  // float32: the same bits either way.
  const at::Tensor x32 = at::randn({9, 64}), w32 = at::rand({64}) + 0.5;
  EXPECT_TRUE(same_bits(transformers_arith().rms_norm(x32, w32, 1e-6), rms_norm(x32, w32, 1e-6)));
  EXPECT_TRUE(same_bits(transformers_arith().rms_norm(x32, at::Tensor(), 1e-6), rms_norm(x32, at::Tensor(), 1e-6)));
}

TEST(TransformersArithmetic, HcExpandMixesInTheStreamsDtype) {
  at::manual_seed(6);
  const int64_t T = 5, n = 4, D = 32;
  HcMix mix{at::rand({T, n}), at::rand({T, n}) * 2, at::softmax(at::randn({T, n, n}), -1)};
  const at::Tensor streams = at::randn({T, n, D}), y = at::randn({T, D});
  EXPECT_TRUE(same_bits(transformers_arith().hc_expand(streams, y, mix), hc_expand(streams, y, mix)));  // float32
  const at::Tensor s16 = streams.to(at::kBFloat16), y16 = y.to(at::kBFloat16);
  const at::Tensor want =
      mix.post.to(at::kBFloat16).unsqueeze(-1) * y16.unsqueeze(1) + at::bmm(mix.comb.to(at::kBFloat16).transpose(1, 2), s16);
  EXPECT_TRUE(same_bits(transformers_arith().hc_expand(s16, y16, mix), want));
}

// Runs one 300-token sequence one-shot or chunked (37 | 100 | 130, then decode) -> logits [300, V].
at::Tensor run_tiny(const ModelConfig& config, io::DType weights_dtype, at::ScalarType dtype, const Arithmetic& arith, bool incremental) {
  constexpr int64_t kBlocks = 8;
  const std::vector<SeqPlan> plans{{random_tokens(300, config.vocab_size, 41), {37, 100, 130}, 2, shuffled_blocks({3}, kBlocks, 4)[0]}};
  SingleRankCommunicator comm;
  const ModelWeights weights = random_weights(config, WeightFormat{weights_dtype, false, false}, /*seed=*/21, at::kCPU);
  const DeepseekV4Model model(weights, comm, model_options(arith));
  ModelCache cache(config, ModelCache::Options{kBlocks, 4, dtype, at::kCPU});
  return (incremental ? run_incremental(model, plans, cache) : run_one_shot(model, plans, cache))[0];
}

double max_diff(const at::Tensor& a, const at::Tensor& b) { return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>(); }

// float32, tiny.json (score- and hash-routed layers, CSA and HCA): the same logits up to the mHC
// projection's order, one-shot and chunked.
TEST(TransformersArithmetic, TransformersRoundingIsTheOfficialForwardInFloat32) {
  const ModelConfig config = load_model_config(source_dir() + "/configs/models/tiny.json");
  const at::Tensor official = run_tiny(config, io::DType::kF32, at::kFloat, official_arith(), false);
  const double one_shot = max_diff(official, run_tiny(config, io::DType::kF32, at::kFloat, transformers_arith(), false));
  const double chunked = max_diff(official, run_tiny(config, io::DType::kF32, at::kFloat, transformers_arith(), true));
  std::printf("[transformers arithmetic] tiny float32, official vs transformers rounding: one-shot %.3g, chunked %.3g (max |logit| %.3g)\n",
              one_shot, chunked, official.abs().max().item<double>());
  EXPECT_LT(one_shot, 1e-4);
  EXPECT_LT(chunked, 1e-4);
}

// float32, several sequences stepped together: the official forward's logits. Decode steps group
// several sequences at different positions (multi-token runs form groups of one), so
// the transformers arithmetic's attention pads the keys each one's cache would hold.
TEST(TransformersArithmetic, TransformersAttentionBatchesSequencesAtDifferentPositions) {
  const ModelConfig config = load_model_config(source_dir() + "/configs/models/tiny.json");
  constexpr int64_t kBlocks = 16;
  const auto blocks = shuffled_blocks({3, 3, 2, 1}, kBlocks, 9);
  const std::vector<SeqPlan> plans{{random_tokens(300, config.vocab_size, 51), {131, 40}, 1, blocks[0]},
                                   {random_tokens(290, config.vocab_size, 52), {7, 5, 130}, 2, blocks[1]},
                                   {random_tokens(200, config.vocab_size, 53), {200}, 3, blocks[2]},
                                   {random_tokens(60, config.vocab_size, 54), {}, 4, blocks[3]}};
  SingleRankCommunicator comm;
  const ModelWeights weights = random_weights(config, WeightFormat{io::DType::kF32, false, false}, /*seed=*/25, at::kCPU);
  std::vector<std::vector<at::Tensor>> logits;
  for (const Arithmetic* arith : {&official_arith(), &transformers_arith()}) {
    const DeepseekV4Model model(weights, comm, model_options(*arith));
    ModelCache cache(config, ModelCache::Options{kBlocks, 5, at::kFloat, at::kCPU});
    logits.push_back(run_incremental(model, plans, cache));
  }
  const double diff = max_abs_diff(logits[0], logits[1]);
  std::printf("[transformers arithmetic] tiny float32, 4 sequences stepped together, official vs transformers arithmetic: %.3g\n", diff);
  EXPECT_LT(diff, 1e-4);
}

// bfloat16, tests/reference/tiny-bf16.json (no discrete choice that a rounding difference can
// flip): transformers rounding differs from official rounding, stays as close to float32 as
// rounding allows, and its chunked run tracks its one-shot run.
TEST(TransformersArithmetic, TransformersRoundingInBfloat16) {
  const ModelConfig config = load_model_config(source_dir() + "/tests/reference/tiny-bf16.json");
  const at::Tensor exact = run_tiny(config, io::DType::kF32, at::kFloat, official_arith(), false);
  const at::Tensor official = run_tiny(config, io::DType::kBF16, at::kBFloat16, official_arith(), false);
  const at::Tensor transformers = run_tiny(config, io::DType::kBF16, at::kBFloat16, transformers_arith(), false);
  const at::Tensor chunked = run_tiny(config, io::DType::kBF16, at::kBFloat16, transformers_arith(), true);
  const double between = max_diff(official, transformers), from_exact = max_diff(transformers, exact);
  const double official_from_exact = max_diff(official, exact), chunk = max_diff(transformers, chunked);
  std::printf(
      "[transformers arithmetic] tiny-bf16 bfloat16: official vs transformers rounding %.3g; from float32: official %.3g, transformers "
      "%.3g; "
      "transformers chunked vs one-shot %.3g (max |logit| %.3g)\n",
      between, official_from_exact, from_exact, chunk, exact.abs().max().item<double>());
  EXPECT_GT(between, 0.0);
  EXPECT_LT(from_exact, 0.25);
  EXPECT_LT(chunk, 0.25);
}

// The observer (DeepseekV4Model::Options::observer) sees every stage of every layer in forward
// order, with the shapes tests/reference/compare_taps.py expects, and changes no logit.
TEST(Observer, SeesEveryStageInOrderAndChangesNothing) {
  const ModelConfig config = load_model_config(source_dir() + "/configs/models/tiny.json");
  const ModelWeights weights = random_weights(config, WeightFormat{io::DType::kF32, false, false}, /*seed=*/23, at::kCPU);
  const std::vector<SeqPlan> plans{{random_tokens(137, config.vocab_size, 43), {}, 1, shuffled_blocks({2}, 4, 5)[0]}};
  SingleRankCommunicator comm;
  std::vector<std::string> names;
  std::map<std::string, std::vector<int64_t>> shapes;
  at::Tensor hidden;
  const DeepseekV4Model plain(weights, comm, model_options());
  const DeepseekV4Model watched(
      weights, comm, model_options(official_arith(), AttentionOptions{}.query_tile, [&](const std::string& name, const at::Tensor& value) {
        names.push_back(name);
        shapes[name] = std::vector<int64_t>(value.sizes().begin(), value.sizes().end());
        if (name == "hidden") hidden = value.clone();
      }));
  ModelCache cache_a(config, ModelCache::Options{4, 2, at::kFloat, at::kCPU}),
      cache_b(config, ModelCache::Options{4, 2, at::kFloat, at::kCPU});
  const at::Tensor want = run_one_shot(plain, plans, cache_a)[0];
  const at::Tensor got = run_one_shot(watched, plans, cache_b)[0];
  EXPECT_TRUE(same_bits(want, got));
  // Layer 2 is CSA (compressor and indexer), layer 0 sliding-window only.
  const std::vector<std::string> layer2{"layers.2.attn_norm_out",
                                        "layers.2.attn.q_residual",
                                        "layers.2.attn.q_proj",
                                        "layers.2.attn.kv_normed",
                                        "layers.2.attn.compressor.entries",
                                        "layers.2.attn.indexer.compressor.entries",
                                        "layers.2.attn.o",
                                        "layers.2.attn.z",
                                        "layers.2.attn_out",
                                        "layers.2.attn_streams",
                                        "layers.2.ffn_norm_out",
                                        "layers.2.ffn.routed",
                                        "layers.2.ffn.shared",
                                        "layers.2.ffn_out",
                                        "layers.2.streams"};
  const auto first = std::find(names.begin(), names.end(), layer2.front());
  ASSERT_NE(first, names.end());
  ASSERT_GE(names.end() - first, static_cast<std::ptrdiff_t>(layer2.size()));
  EXPECT_EQ(std::vector<std::string>(first, first + static_cast<std::ptrdiff_t>(layer2.size())), layer2);
  EXPECT_EQ(std::count(names.begin(), names.end(), "layers.0.attn.compressor.entries"), 0);
  EXPECT_EQ(names.back(), "hidden");
  EXPECT_EQ(names.size(), static_cast<size_t>(config.num_layers * 13 + 2 * 2 + 2 + 1));  // 4 compressed layers, 2 CSA
  const int64_t T = 137, D = config.hidden_size, G = config.o_groups;
  EXPECT_EQ(shapes["layers.2.attn.o"], (std::vector<int64_t>{T, G, config.num_heads * config.head_dim / G}));
  EXPECT_EQ(shapes["layers.2.attn.compressor.entries"], (std::vector<int64_t>{1, (T + 3) / 4, config.head_dim}));
  EXPECT_EQ(shapes["layers.5.streams"], (std::vector<int64_t>{T, config.hc_mult, D}));
  EXPECT_TRUE(same_bits(at::linear(hidden, weights.get("head.weight")), got));
}

}  // namespace
}  // namespace deepinfer::model::testing
