// Checkpoint loading: write -> load round trips, both name spellings, expert ranges, and
// errors that name the offending tensor.
#include "model/checkpoint_loader.h"

#include <gtest/gtest.h>

#include "io/durable_file.h"

#include <string>

#include "model/checkpoint_writer.h"
#include "model/quant.h"
#include "model/random_weights.h"
#include "tests/model/checkpoint_test_util.h"

namespace deepinfer::model {
namespace {

using deepinfer::testing::TempDir;
using testing::RawTensor;
using testing::small_config;

const WeightFormat kF32{io::DType::kF32, false, false};
const WeightFormat kFlash{io::DType::kBF16, true, true};  // V4-Flash layout: BF16, FP8 linears, FP4 experts

// The message of the error load_checkpoint throws, or "" when it loads.
std::string load_error(const std::string& dir) {
  try {
    load_checkpoint(dir, LoadOptions{});
  } catch (const c10::Error& error) {
    return error.what_without_backtrace();
  } catch (const std::exception& error) {
    return error.what();
  }
  return "";
}

TEST(CheckpointLoaderTest, WriteThenLoadIsBitwiseEqual) {
  TempDir dir;
  const ModelConfig config = small_config();
  for (const WeightFormat& format : {kF32, kFlash, WeightFormat{io::DType::kBF16, false, false}}) {
    const std::string name = std::string(io::dtype_name(format.dense_dtype)) + (format.fp8_linears ? "_fp8" : "");
    SCOPED_TRACE(name);
    const at::ScalarType dtype = format.dense_dtype == io::DType::kF32 ? at::kFloat : at::kBFloat16;
    const ModelWeights weights = random_weights(config, format, /*seed=*/3, at::kCPU);
    write_checkpoint(config, weights, format, dir.file(name));
    LoadReport report;
    const ModelWeights loaded = load_checkpoint(dir.file(name), LoadOptions{.dtype = dtype}, &report);
    testing::expect_same_weights(loaded, weights);
    EXPECT_EQ(report.spelling, NameSpelling::kOfficial);
    EXPECT_EQ(report.ignored, 0);
    EXPECT_EQ(report.skipped_experts, 0);
    EXPECT_EQ(report.loaded, static_cast<int64_t>(weight_specs(config, format).size()));
  }
}

TEST(CheckpointLoaderTest, Fp8LinearsAreDequantizedAndFp4ExpertsStayPacked) {
  TempDir dir;
  const ModelConfig config = small_config();
  write_checkpoint(config, random_weights(config, kFlash, 1, at::kCPU), kFlash, dir.path());
  const io::Checkpoint checkpoint = io::Checkpoint::open(dir.path());
  EXPECT_EQ(checkpoint.find("layers.0.attn.wq_a.weight")->dtype, io::DType::kF8E4M3);
  EXPECT_EQ(checkpoint.find("layers.0.attn.wq_a.scale")->shape, (std::vector<int64_t>{1, 1}));  // [64, 96] in 128-blocks
  EXPECT_EQ(checkpoint.find("layers.0.ffn.experts.0.w2.weight")->dtype, io::DType::kI8);
  EXPECT_EQ(checkpoint.find("layers.0.ffn.experts.0.w2.scale")->shape, (std::vector<int64_t>{96, 2}));  // in 48: ragged
  const ModelWeights packed = load_checkpoint(dir.path(), LoadOptions{.dtype = at::kFloat});
  EXPECT_EQ(packed.get("layers.0.attn.wq_a.weight").scalar_type(), at::kFloat);
  EXPECT_FALSE(packed.contains("layers.0.attn.wq_a.scale"));
  EXPECT_TRUE(packed.expert_packed(0, 0));
  const ModelWeights kept = load_checkpoint(dir.path(), LoadOptions{.dtype = at::kFloat, .keep_fp8 = true});
  EXPECT_EQ(kept.get("layers.0.attn.wq_a.weight").scalar_type(), at::kByte);
  EXPECT_EQ(kept.get("layers.0.attn.wq_a.scale").scalar_type(), at::kFloat);
  EXPECT_TRUE(kept.linear(0, "attn.wq_a").fp8());
  EXPECT_TRUE(at::equal(dequant_fp8_scaled(kept.get("layers.0.attn.wq_a.weight"), kept.get("layers.0.attn.wq_a.scale"), at::kFloat),
                        packed.get("layers.0.attn.wq_a.weight")));
  kept.check_complete(kFlash);
  const ModelWeights dense = load_checkpoint(dir.path(), LoadOptions{.dtype = at::kFloat, .dequantize_fp4_experts = true});
  EXPECT_FALSE(dense.expert_packed(0, 0));
  EXPECT_FALSE(dense.contains("layers.0.ffn.experts.0.w2.scale"));
  for (const char* which : {"w1", "w2", "w3"}) {
    EXPECT_TRUE(at::equal(dense.expert_matrix(4, 7, which), packed.expert_matrix(4, 7, which))) << which;
  }
}

TEST(CheckpointLoaderTest, ExpertRangeLoadsOnlyThoseExperts) {
  TempDir dir;
  const ModelConfig config = small_config();
  const ModelWeights all = random_weights(config, kFlash, 8, at::kCPU);
  write_checkpoint(config, all, kFlash, dir.path());
  LoadReport report;
  const ModelWeights part = load_checkpoint(dir.path(), LoadOptions{.dtype = at::kBFloat16, .experts = ExpertRange{2, 5}}, &report);
  EXPECT_EQ(part.experts().first, 2);
  EXPECT_EQ(part.experts().last, 5);
  EXPECT_FALSE(part.contains("layers.0.ffn.experts.1.w1.weight"));
  EXPECT_FALSE(part.contains("layers.0.ffn.experts.5.w1.weight"));
  EXPECT_TRUE(at::equal(part.get("layers.5.ffn.experts.4.w3.weight"), all.get("layers.5.ffn.experts.4.w3.weight")));
  EXPECT_TRUE(at::equal(part.get("embed.weight"), all.get("embed.weight")));
  // 5 experts outside the range x 6 layers x (w1, w2, w3) x (weight, scale).
  EXPECT_EQ(report.skipped_experts, 5 * 6 * 3 * 2);
  EXPECT_EQ(report.ignored, 0);
}

TEST(CheckpointLoaderTest, MissingTensorIsNamed) {
  TempDir dir;
  const ModelConfig config = small_config();
  write_checkpoint(config, random_weights(config, kFlash, 1, at::kCPU), kFlash, dir.file("good"));
  for (const std::string name :
       {"layers.2.attn.indexer.wq_b.scale", "layers.3.ffn.gate.bias", "head.weight", "layers.4.ffn.experts.6.w2.weight"}) {
    const std::string bad = dir.file("bad");
    io::remove_tree(std::string(bad));
    testing::rewrite_checkpoint(dir.file("good"), bad, [&](RawTensor& t) { t.drop = t.name == name; });
    const std::string error = load_error(bad);
    EXPECT_NE(error.find("missing tensor '" + name + "'"), std::string::npos) << error;
  }
}

TEST(CheckpointLoaderTest, WrongShapeIsNamed) {
  TempDir dir;
  const ModelConfig config = small_config();
  write_checkpoint(config, random_weights(config, kF32, 1, at::kCPU), kF32, dir.file("good"));
  testing::rewrite_checkpoint(dir.file("good"), dir.file("bad"), [](RawTensor& t) {
    if (t.name != "layers.1.attn.wkv.weight") return;
    t.shape = {t.shape[1], t.shape[0]};  // [64, 96] stored transposed
  });
  const std::string error = load_error(dir.file("bad"));
  EXPECT_NE(error.find("tensor 'layers.1.attn.wkv.weight'"), std::string::npos) << error;
  EXPECT_NE(error.find("expected shape [64, 96], got [96, 64]"), std::string::npos) << error;
  EXPECT_NE(error.find("model.safetensors"), std::string::npos) << error;  // names the file
}

TEST(CheckpointLoaderTest, WrongDtypeIsNamed) {
  TempDir dir;
  const ModelConfig config = small_config();
  write_checkpoint(config, random_weights(config, kF32, 1, at::kCPU), kF32, dir.file("good"));
  testing::rewrite_checkpoint(dir.file("good"), dir.file("bad"), [](RawTensor& t) {
    if (t.name != "layers.0.attn.attn_sink") return;
    t.dtype = io::DType::kI32;  // same byte count, wrong type
  });
  const std::string error = load_error(dir.file("bad"));
  EXPECT_NE(error.find("tensor 'layers.0.attn.attn_sink'"), std::string::npos) << error;
  EXPECT_NE(error.find("expected dtype F32, got I32"), std::string::npos) << error;
  // A dense tensor in a different dense dtype than the embedding is also wrong.
  testing::rewrite_checkpoint(dir.file("good"), dir.file("bad2"), [](RawTensor& t) {
    if (t.name != "layers.3.attn_norm.weight") return;
    t.dtype = io::DType::kBF16;
    t.shape = {t.shape[0] * 2};
  });
  const std::string error2 = load_error(dir.file("bad2"));
  EXPECT_NE(error2.find("tensor 'layers.3.attn_norm.weight'"), std::string::npos) << error2;
  EXPECT_NE(error2.find("expected dtype F32, got BF16"), std::string::npos) << error2;
  // tid2eid values must be expert ids.
  testing::rewrite_checkpoint(dir.file("good"), dir.file("bad3"), [](RawTensor& t) {
    if (t.name == "layers.1.ffn.gate.tid2eid") reinterpret_cast<int64_t*>(t.bytes.data())[5] = 8;
  });
  const std::string error3 = load_error(dir.file("bad3"));
  EXPECT_NE(error3.find("'layers.1.ffn.gate.tid2eid' holds expert ids in [0, 8], outside [0, 8)"), std::string::npos) << error3;
}

// What transformers' save_pretrained (5.17) writes: deepseek-v4.md §3 and §8.
std::string save_pretrained_name(const std::string& official) {
  if (official == "embed.weight") return "model.embed_tokens.weight";
  if (official == "head.weight") return "head.weight";
  if (official == "hc_head_fn") return "model.hc_head.hc_fn";
  if (official == "hc_head_base") return "model.hc_head.hc_base";
  if (official == "hc_head_scale") return "model.hc_head.hc_scale";
  const std::string kv = ".attn.kv_norm.weight";
  if (official.ends_with(kv)) return "model." + official.substr(0, official.size() - kv.size()) + ".attn.norm.weight";
  return "model." + official;
}

TEST(CheckpointLoaderTest, BothSpellingsLoadTheSameWeights) {
  TempDir dir;
  const ModelConfig config = small_config();
  const ModelWeights weights = random_weights(config, kFlash, 6, at::kCPU);
  write_checkpoint(config, weights, kFlash, dir.file("official"));
  const std::vector<std::byte> four(4);
  const std::vector<RawTensor> mtp = {{"mtp.0.enorm.weight", io::DType::kF32, {1}, four},
                                      {"mtp.0.ffn.experts.0.w1.weight", io::DType::kF32, {1}, four}};
  testing::rewrite_checkpoint(
      dir.file("official"), dir.file("hf"), [](RawTensor& t) { t.name = save_pretrained_name(t.name); }, mtp);
  const io::Checkpoint hf = io::Checkpoint::open(dir.file("hf"));
  ASSERT_NE(hf.find("model.layers.2.attn.norm.weight"), nullptr);
  ASSERT_NE(hf.find("model.hc_head.hc_fn"), nullptr);
  ASSERT_EQ(hf.find("layers.2.attn.kv_norm.weight"), nullptr);
  LoadReport report;
  const ModelWeights loaded = load_checkpoint(dir.file("hf"), LoadOptions{.dtype = at::kBFloat16}, &report);
  EXPECT_EQ(report.spelling, NameSpelling::kSavePretrained);
  EXPECT_EQ(report.ignored, 2);
  EXPECT_EQ(report.ignored_examples, (std::vector<std::string>{"mtp.0.enorm.weight", "mtp.0.ffn.experts.0.w1.weight"}));
  testing::expect_same_weights(loaded, weights);
  // A missing tensor in this spelling is reported under its official name and what was tried.
  testing::rewrite_checkpoint(dir.file("hf"), dir.file("hf_bad"),
                              [](RawTensor& t) { t.drop = t.name == "model.layers.4.attn.norm.weight"; });
  const std::string error = load_error(dir.file("hf_bad"));
  EXPECT_NE(error.find("missing tensor 'layers.4.attn.kv_norm.weight' (looked for 'model.layers.4.attn.norm.weight', "
                       "'model.layers.4.attn.kv_norm.weight')"),
            std::string::npos)
      << error;
}

TEST(CheckpointLoaderTest, TensorStoredTwiceOrNoEmbeddingIsAnError) {
  TempDir dir;
  const ModelConfig config = small_config();
  write_checkpoint(config, random_weights(config, kF32, 6, at::kCPU), kF32, dir.file("official"));
  testing::rewrite_checkpoint(dir.file("official"), dir.file("hf"), [](RawTensor& t) { t.name = save_pretrained_name(t.name); },
                              {{"lm_head.weight", io::DType::kF32, {1}, std::vector<std::byte>(4)}});
  std::string error = load_error(dir.file("hf"));
  EXPECT_NE(error.find("tensor 'head.weight' is stored twice, as 'head.weight' and as 'lm_head.weight'"), std::string::npos) << error;
  testing::rewrite_checkpoint(dir.file("official"), dir.file("noembed"), [](RawTensor& t) { t.drop = t.name == "embed.weight"; });
  error = load_error(dir.file("noembed"));
  EXPECT_NE(error.find("missing tensor 'embed.weight'"), std::string::npos) << error;
}

TEST(CheckpointLoaderTest, LoadsOntoCuda) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: CPU loading is covered by the other tests";
  TempDir dir;
  const ModelConfig config = small_config();
  const ModelWeights weights = random_weights(config, kFlash, 2, at::kCPU);
  write_checkpoint(config, weights, kFlash, dir.path());
  const ModelWeights loaded = load_checkpoint(dir.path(), LoadOptions{.dtype = at::kBFloat16, .device = at::kCUDA});
  EXPECT_TRUE(loaded.get("embed.weight").is_cuda());
  EXPECT_TRUE(loaded.get("layers.3.ffn.experts.2.w1.weight").is_cuda());
  testing::expect_same_weights(loaded, weights);
}

}  // namespace
}  // namespace deepinfer::model
