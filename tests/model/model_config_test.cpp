// ModelConfig parsing: both spellings, presets, and errors that name the key and value.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "io/durable_file.h"
#include "model/model_config.h"
#include "model/weight_specs.h"

namespace deepinfer::model {
namespace {

std::string source_dir() {
  const char* dir = std::getenv("DEEPINFER_SOURCE_DIR");
  return dir != nullptr ? dir : ".";
}

// The tiny config of deepseek-v4.md §1.2 with the HF key spelling.
std::string hf_tiny(const std::string& extra = "") {
  return R"({
    "model_type": "deepseek_v4", "vocab_size": 512, "hidden_size": 256, "num_hidden_layers": 6,
    "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 64, "partial_rotary_factor": 0.25,
    "q_lora_rank": 128, "o_groups": 4, "o_lora_rank": 64, "sliding_window": 128,
    "layer_types": ["sliding_attention", "sliding_attention", "compressed_sparse_attention",
                    "heavily_compressed_attention", "compressed_sparse_attention", "heavily_compressed_attention"],
    "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128},
    "mlp_layer_types": ["hash_moe", "hash_moe", "hash_moe", "moe", "moe", "moe"],
    "rope_parameters": {"main": {"rope_type": "default", "rope_theta": 10000.0},
                        "compress": {"rope_type": "yarn", "rope_theta": 160000.0, "factor": 16.0, "beta_fast": 32.0,
                                     "beta_slow": 1.0, "original_max_position_embeddings": 65536, "attention_factor": 1.0}},
    "index_n_heads": 16, "index_head_dim": 32, "index_topk": 16, "n_routed_experts": 8, "num_experts_per_tok": 2,
    "n_shared_experts": 1, "moe_intermediate_size": 128, "scoring_func": "sqrtsoftplus", "routed_scaling_factor": 1.5,
    "swiglu_limit": 10.0, "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-6, "rms_norm_eps": 1e-6)" +
         extra + "}";
}

// Replaces the first occurrence of `from` in `text` (test helper for broken configs).
std::string replace(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

void expect_error(const std::string& json, const std::string& part1, const std::string& part2) {
  try {
    parse_model_config(json, "/ckpt/config.json");
    FAIL() << "expected an error mentioning " << part1;
  } catch (const std::invalid_argument& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("/ckpt/config.json"), std::string::npos) << message;
    EXPECT_NE(message.find(part1), std::string::npos) << message;
    EXPECT_NE(message.find(part2), std::string::npos) << message;
  }
}

TEST(ModelConfig, BothSpellingsGiveTheSameTinyConfig) {
  const ModelConfig official = load_model_config(source_dir() + "/configs/models/tiny.json");
  const ModelConfig hf = parse_model_config(hf_tiny(), "hf");
  for (const ModelConfig* c : {&official, &hf}) {
    EXPECT_EQ(c->rope_head_dim, 16);
    EXPECT_EQ(c->compress_ratios, (std::vector<int64_t>{0, 0, 4, 128, 4, 128}));
    EXPECT_EQ(c->layer_type(2), LayerType::kCsa);
    EXPECT_EQ(c->layer_type(3), LayerType::kHca);
    EXPECT_EQ(c->layer_type(0), LayerType::kSliding);
    EXPECT_EQ(c->num_hash_layers(), 3);
    EXPECT_TRUE(c->is_hash_layer(2));
    EXPECT_FALSE(c->is_hash_layer(3));
    EXPECT_DOUBLE_EQ(c->compress_rope_theta, 160000.0);
    EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0);
    EXPECT_DOUBLE_EQ(c->yarn.factor, 16.0);
    EXPECT_EQ(c->yarn.original_max_position_embeddings, 65536);
    EXPECT_EQ(c->index_n_heads, 16);
    EXPECT_DOUBLE_EQ(c->routed_scaling_factor, 1.5);
    EXPECT_EQ(c->compress_overlap(2), 2);
    EXPECT_EQ(c->compress_overlap(3), 1);
  }
}

TEST(ModelConfig, PresetsParse) {
  const ModelConfig flash = load_model_config(source_dir() + "/configs/models/v4-flash.json");
  EXPECT_EQ(flash.num_layers, 43);
  EXPECT_EQ(flash.compress_ratios.size(), 43u);  // the trailing MTP ratio is dropped
  int csa = 0, hca = 0;
  for (int64_t l = 0; l < flash.num_layers; ++l) {
    csa += flash.layer_type(l) == LayerType::kCsa;
    hca += flash.layer_type(l) == LayerType::kHca;
  }
  EXPECT_EQ(csa, 21);
  EXPECT_EQ(hca, 20);
  EXPECT_EQ(flash.num_hash_layers(), 3);
  const ModelConfig slice = load_model_config(source_dir() + "/configs/models/v4-flash-slice.json");
  EXPECT_EQ(slice.num_layers, 4);
  EXPECT_EQ(slice.layer_types, (std::vector<LayerType>{LayerType::kSliding, LayerType::kCsa, LayerType::kHca, LayerType::kCsa}));
  EXPECT_TRUE(slice.is_hash_layer(0));
  EXPECT_FALSE(slice.is_hash_layer(1));
  EXPECT_EQ(slice.head_dim, flash.head_dim);
  EXPECT_EQ(tiny_fast_test_config().compress_ratio(3), 16);
  // The storage format the presets announce (what random:CONFIG builds).
  const WeightFormat slice_format = announced_format(io::read_file(source_dir() + "/configs/models/v4-flash-slice.json"), io::DType::kBF16);
  EXPECT_TRUE(slice_format.fp4_experts);
  EXPECT_TRUE(slice_format.fp8_linears);
  EXPECT_EQ(slice_format.dense_dtype, io::DType::kBF16);
  const WeightFormat tiny_format = announced_format(io::read_file(source_dir() + "/configs/models/tiny.json"), io::DType::kF32);
  EXPECT_FALSE(tiny_format.fp4_experts);
  EXPECT_FALSE(tiny_format.fp8_linears);
}

TEST(ModelConfig, LoadsFromADirectory) {
  // A directory argument reads DIR/config.json; a missing file names the path.
  EXPECT_THROW(load_model_config("/nonexistent/dir"), std::invalid_argument);
  try {
    load_model_config("/nonexistent/x.json");
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/x.json"), std::string::npos);
  }
}

TEST(ModelConfig, ErrorsNameKeyAndValue) {
  expect_error("{not json", "not valid JSON", "");
  expect_error(replace(hf_tiny(), R"("vocab_size": 512,)", ""), "vocab_size", "missing");
  expect_error(replace(hf_tiny(), R"("head_dim": 64)", R"("head_dim": "64")"), "head_dim", "\"64\"");
  expect_error(replace(hf_tiny(), R"("o_groups": 4)", R"("o_groups": 3)"), "o_groups", "3");
  expect_error(replace(hf_tiny(), R"("heavily_compressed_attention"],)", R"("dense_attention"],)"), "layer_types", "dense_attention");
  expect_error(replace(hf_tiny(), R"("heavily_compressed_attention": 128})", R"("heavily_compressed_attention": 100})"), "compress_ratios",
               "100");
  expect_error(replace(hf_tiny(), R"("moe", "moe", "moe"])", R"("moe", "moe"])"), "mlp_layer_types", "5 entries");
  expect_error(replace(hf_tiny(), R"("scoring_func": "sqrtsoftplus")", R"("scoring_func": "relu")"), "scoring_func", "relu");
  expect_error(replace(hf_tiny(), R"("rope_type": "yarn")", R"("rope_type": "linear")"), "rope_parameters.compress.rope_type", "linear");
  expect_error(replace(hf_tiny(), R"("num_experts_per_tok": 2)", R"("num_experts_per_tok": 9)"), "num_experts_per_tok", "9");
  expect_error(replace(hf_tiny(), R"("partial_rotary_factor": 0.25)", R"("partial_rotary_factor": 0.3)"), "partial_rotary_factor", "19.2");
  expect_error(hf_tiny(R"(, "qk_rope_head_dim": 32)"), "qk_rope_head_dim", "32");
  expect_error(hf_tiny(R"(, "compress_ratios": [0, 0, 4, 128, 4, 4])"), "layer_types", "disagrees");
  expect_error(hf_tiny(R"(, "num_hash_layers": 2)"), "mlp_layer_types", "num_hash_layers=2");
  expect_error(replace(hf_tiny(), R"("deepseek_v4")", R"("llama")"), "model_type", "llama");
  expect_error(replace(hf_tiny(), R"("num_key_value_heads": 1)", R"("num_key_value_heads": 8)"), "num_key_value_heads", "8");
  expect_error(hf_tiny(R"(, "vocab_size": 512)"), "vocab_size", "twice");
  expect_error(replace(hf_tiny(), R"("index_head_dim": 32)", R"("index_head_dim": 16)"), "index_head_dim", "16");
}

TEST(ModelConfig, OfficialRatiosWithMtpEntryAndErrors) {
  std::string official = R"({"vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 3, "num_attention_heads": 2,
    "head_dim": 16, "qk_rope_head_dim": 8, "q_lora_rank": 16, "o_groups": 2, "o_lora_rank": 8,
    "compress_ratios": [0, 4, 16, 0], "num_nextn_predict_layers": 1, "num_hash_layers": 1,
    "index_n_heads": 2, "index_head_dim": 16, "index_topk": 2, "n_routed_experts": 4, "num_experts_per_tok": 2,
    "moe_intermediate_size": 16})";
  const ModelConfig c = parse_model_config(official, "x");
  EXPECT_EQ(c.compress_ratios, (std::vector<int64_t>{0, 4, 16}));
  EXPECT_EQ(c.layer_types, (std::vector<LayerType>{LayerType::kSliding, LayerType::kCsa, LayerType::kHca}));
  EXPECT_EQ(c.mlp_types, (std::vector<MlpType>{MlpType::kHashMoe, MlpType::kMoe, MlpType::kMoe}));
  expect_error(replace(official, "[0, 4, 16, 0]", "[0, 4]"), "compress_ratios", "2 entries");
  expect_error(replace(official, "[0, 4, 16, 0]", "[0, 4, -16]"), "compress_ratios", "-16");
  expect_error(replace(official, R"("num_hash_layers": 1)", R"("num_hash_layers": 7)"), "num_hash_layers", "7");
  expect_error(replace(official, R"("qk_rope_head_dim": 8,)", ""), "qk_rope_head_dim", "missing");
}

TEST(WeightSpecs, FlashShapesMatchTheCensus) {
  const ModelConfig flash = load_model_config(source_dir() + "/configs/models/v4-flash.json");
  const auto specs = weight_specs(flash, v4_flash_format());
  auto find = [&](const std::string& name) -> const WeightSpec& {
    for (const WeightSpec& s : specs) {
      if (s.name == name) return s;
    }
    throw std::runtime_error("no spec " + name);
  };
  EXPECT_EQ(find("layers.2.attn.wq_a.scale").shape, (std::vector<int64_t>{8, 32}));
  EXPECT_EQ(find("layers.2.attn.wq_b.weight").shape, (std::vector<int64_t>{32768, 1024}));
  EXPECT_EQ(find("layers.2.attn.wq_b.scale").shape, (std::vector<int64_t>{256, 8}));
  EXPECT_EQ(find("layers.2.attn.wo_a.weight").shape, (std::vector<int64_t>{8192, 4096}));
  EXPECT_EQ(find("layers.2.attn.compressor.wkv.weight").shape, (std::vector<int64_t>{1024, 4096}));
  EXPECT_EQ(find("layers.3.attn.compressor.ape").shape, (std::vector<int64_t>{128, 512}));
  EXPECT_EQ(find("layers.2.attn.indexer.wq_b.scale").shape, (std::vector<int64_t>{64, 8}));
  EXPECT_EQ(find("layers.2.attn.indexer.compressor.ape").shape, (std::vector<int64_t>{4, 256}));
  EXPECT_EQ(find("layers.0.ffn.gate.tid2eid").shape, (std::vector<int64_t>{129280, 6}));
  EXPECT_EQ(find("layers.3.ffn.gate.bias").dtype, io::DType::kF32);
  EXPECT_EQ(find("layers.5.ffn.experts.7.w1.weight").shape, (std::vector<int64_t>{2048, 2048}));
  EXPECT_EQ(find("layers.5.ffn.experts.7.w1.weight").dtype, io::DType::kI8);
  EXPECT_EQ(find("layers.5.ffn.experts.7.w1.scale").shape, (std::vector<int64_t>{2048, 128}));
  EXPECT_EQ(find("layers.5.ffn.experts.7.w2.weight").shape, (std::vector<int64_t>{4096, 1024}));
  EXPECT_EQ(find("layers.5.ffn.experts.7.w2.scale").shape, (std::vector<int64_t>{4096, 64}));
  EXPECT_EQ(find("layers.5.ffn.shared_experts.w2.scale").shape, (std::vector<int64_t>{32, 16}));
  EXPECT_EQ(find("hc_head_fn").shape, (std::vector<int64_t>{4, 16384}));
  EXPECT_EQ(find("layers.1.hc_attn_fn").shape, (std::vector<int64_t>{24, 16384}));
  for (const WeightSpec& s : specs) {
    EXPECT_EQ(s.name.find("layers.0.attn.compressor"), std::string::npos);
    EXPECT_EQ(s.name.find("layers.3.attn.indexer"), std::string::npos);
  }
  // 43 layers x 256 experts x 3 matrices x (weight + scale) routed tensors.
  int64_t routed = 0;
  for (const WeightSpec& s : specs) routed += s.expert >= 0;
  EXPECT_EQ(routed, 43 * 256 * 6);
  EXPECT_EQ(weight_specs(flash, v4_flash_format(), ExpertRange{8, 16}).size(), specs.size() - 43 * 248 * 6);
}

}  // namespace
}  // namespace deepinfer::model
