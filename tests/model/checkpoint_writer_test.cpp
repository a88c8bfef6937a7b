// config.json spelling, determinism and sharding of the checkpoint writer / init-model.
#include "model/checkpoint_writer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/durable_file.h"
#include "io/safetensors.h"
#include "model/checkpoint_loader.h"
#include "model/random_weights.h"
#include "tests/model/checkpoint_test_util.h"

namespace deepinfer::model {
namespace {

namespace fs = std::filesystem;
using deepinfer::testing::TempDir;
using testing::small_config;

std::string write_config(const TempDir& dir, const ModelConfig& config) {
  const std::string path = dir.file("input_config.json");
  io::write_file_atomically(path, config_json(config, WeightFormat{}));
  return path;
}

TEST(CheckpointWriterTest, ConfigJsonUsesOfficialKeysAndRoundTrips) {
  const ModelConfig config = tiny_fast_test_config();
  const std::string text = config_json(config, WeightFormat{io::DType::kBF16, true, true});
  EXPECT_NE(text.find("\"compress_ratios\": [0, 0, 4, 16, 4, 16]"), std::string::npos) << text;
  EXPECT_NE(text.find("\"num_hash_layers\": 3"), std::string::npos) << text;
  EXPECT_NE(text.find("\"qk_rope_head_dim\": 16"), std::string::npos) << text;
  EXPECT_NE(text.find("\"rope_scaling\": {\"type\": \"yarn\", \"factor\": 16.0"), std::string::npos) << text;
  EXPECT_NE(text.find("\"swiglu_limit\": 10.0"), std::string::npos) << text;
  EXPECT_NE(text.find("\"expert_dtype\": \"fp4\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"weight_block_size\": [128, 128]"), std::string::npos) << text;
  EXPECT_EQ(text.find("layer_types"), std::string::npos) << text;
  const ModelConfig parsed = parse_model_config(text, "written");
  EXPECT_EQ(parsed.compress_ratios, config.compress_ratios);
  EXPECT_EQ(parsed.layer_types, config.layer_types);
  EXPECT_EQ(parsed.mlp_types, config.mlp_types);
  EXPECT_EQ(parsed.rope_head_dim, config.rope_head_dim);
  EXPECT_EQ(parsed.hc_eps, config.hc_eps);
  EXPECT_EQ(config_json(parsed, WeightFormat{io::DType::kBF16, true, true}), text);  // a fixpoint
}

TEST(CheckpointWriterTest, ConfigJsonFallsBackToHfKeysWhenOfficialCannotSayIt) {
  ModelConfig config = tiny_fast_test_config();
  config.compress_ratios = {0, 0, 8, 16, 8, 16};  // CSA with ratio 8: official keys would read HCA
  config.mlp_types = {MlpType::kMoe, MlpType::kHashMoe, MlpType::kMoe, MlpType::kMoe, MlpType::kMoe, MlpType::kMoe};
  const std::string text = config_json(config, WeightFormat{});
  EXPECT_EQ(text.find("compress_ratios"), std::string::npos) << text;
  EXPECT_NE(text.find("\"layer_types\": [\"sliding_attention\", \"sliding_attention\", \"compressed_sparse_attention\""), std::string::npos)
      << text;
  EXPECT_NE(text.find("\"mlp_layer_types\": [\"moe\", \"hash_moe\""), std::string::npos) << text;
  const ModelConfig parsed = parse_model_config(text, "written");
  EXPECT_EQ(parsed.layer_types, config.layer_types);
  EXPECT_EQ(parsed.compress_ratios, config.compress_ratios);
  EXPECT_EQ(parsed.mlp_types, config.mlp_types);
}

std::map<std::string, std::string> read_all(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::directory_iterator(dir)) files[entry.path().filename().string()] = io::read_file(entry.path().string());
  return files;
}

TEST(CheckpointWriterTest, InitModelIsDeterministicForASeed) {
  TempDir dir;
  const std::string config_path = write_config(dir, small_config());
  InitModelOptions options{.config_path = config_path, .output_dir = dir.file("a"), .seed = 5, .experts_fp4 = true, .fp8_linears = true};
  init_model(options);
  options.output_dir = dir.file("b");
  init_model(options);
  options.output_dir = dir.file("c");
  options.seed = 6;
  init_model(options);
  const auto a = read_all(dir.file("a")), b = read_all(dir.file("b")), c = read_all(dir.file("c"));
  ASSERT_EQ(a.size(), 2u);  // config.json + model.safetensors
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.at("config.json"), c.at("config.json"));
  EXPECT_NE(a.at("model.safetensors"), c.at("model.safetensors"));
  // Writing into a folder that already holds a checkpoint is refused.
  options.output_dir = dir.file("a");
  EXPECT_THROW(init_model(options), std::invalid_argument);
}

TEST(CheckpointWriterTest, InitModelLoadsBackAsRandomWeights) {
  TempDir dir;
  const ModelConfig config = small_config();
  const std::string config_path = write_config(dir, config);
  for (const WeightFormat format : {WeightFormat{io::DType::kF32, false, false}, WeightFormat{io::DType::kBF16, true, true}}) {
    SCOPED_TRACE(std::string(io::dtype_name(format.dense_dtype)) + (format.fp8_linears ? " fp8" : "") + (format.fp4_experts ? " fp4" : ""));
    const std::string out = dir.file(std::string(io::dtype_name(format.dense_dtype)));
    init_model(InitModelOptions{.config_path = config_path,
                                .output_dir = out,
                                .seed = 9,
                                .experts_fp4 = format.fp4_experts,
                                .fp8_linears = format.fp8_linears,
                                .dense_dtype = format.dense_dtype});
    const at::ScalarType dtype = format.dense_dtype == io::DType::kF32 ? at::kFloat : at::kBFloat16;
    LoadReport report;
    const ModelWeights loaded = load_checkpoint(out, LoadOptions{.dtype = dtype}, &report);
    EXPECT_EQ(report.format.dense_dtype, format.dense_dtype);
    EXPECT_EQ(report.format.fp8_linears, format.fp8_linears);
    EXPECT_EQ(report.format.fp4_experts, format.fp4_experts);
    EXPECT_EQ(report.ignored, 0);
    testing::expect_same_weights(loaded, random_weights(config, format, /*seed=*/9, at::kCPU));
  }
}

TEST(CheckpointWriterTest, ShardsWithAnIndexLoadLikeOneFile) {
  TempDir dir;
  const ModelConfig config = small_config();
  const WeightFormat format{io::DType::kF32, false, true};
  const ModelWeights weights = random_weights(config, format, /*seed=*/2, at::kCPU);
  write_checkpoint(config, weights, format, dir.file("one"));
  write_checkpoint(config, weights, format, dir.file("many"), WriteOptions{.max_shard_bytes = 200 << 10});
  const auto files = read_all(dir.file("many"));
  ASSERT_TRUE(files.count("model.safetensors.index.json"));
  int64_t shards = 0;
  for (const auto& [name, _] : files) shards += name.ends_with(".safetensors");
  EXPECT_GT(shards, 3);
  EXPECT_TRUE(
      files.count("model-00001-of-" + std::string(5 - std::to_string(shards).size(), '0') + std::to_string(shards) + ".safetensors"));
  const io::Checkpoint one = io::Checkpoint::open(dir.file("one")), many = io::Checkpoint::open(dir.file("many"));
  EXPECT_EQ(one.names(), many.names());
  testing::expect_same_weights(load_checkpoint(dir.file("many"), LoadOptions{}), load_checkpoint(dir.file("one"), LoadOptions{}));
}

TEST(CheckpointWriterTest, WriteConvertsBetweenFormats) {
  // In-memory dense experts written as FP4 come back as their FP4 rounding; FP4 written dense
  // comes back dequantized.
  TempDir dir;
  const ModelConfig config = small_config();
  const ModelWeights dense = random_weights(config, WeightFormat{io::DType::kF32, false, false}, 4, at::kCPU);
  write_checkpoint(config, dense, WeightFormat{io::DType::kF32, false, true}, dir.file("fp4"));
  const ModelWeights packed = load_checkpoint(dir.file("fp4"), LoadOptions{});
  ASSERT_TRUE(packed.expert_packed(3, 1));
  const at::Tensor w2 = dense.expert_matrix(3, 1, "w2");
  EXPECT_LT((packed.expert_matrix(3, 1, "w2") - w2).abs().max().item<float>(), 0.25 * w2.abs().max().item<float>());
  write_checkpoint(config, packed, WeightFormat{io::DType::kF32, false, false}, dir.file("dense"));
  const ModelWeights unpacked = load_checkpoint(dir.file("dense"), LoadOptions{});
  EXPECT_FALSE(unpacked.expert_packed(3, 1));
  EXPECT_TRUE(at::equal(unpacked.expert_matrix(3, 1, "w2"), packed.expert_matrix(3, 1, "w2")));
  // A partial (expert-parallel) weight set cannot be written as a checkpoint.
  const ModelWeights part = random_weights(config, WeightFormat{}, 4, at::kCPU, ExpertRange{0, 4});
  EXPECT_THROW(write_checkpoint(config, part, WeightFormat{}, dir.file("part")), c10::Error);
}

}  // namespace
}  // namespace deepinfer::model
