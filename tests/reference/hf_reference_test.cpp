// Our forward against transformers' DeepseekV4ForCausalLM (label `model`; run on the GPU machine
// through tests/reference/run_hf_reference.sh). Reads the ids, chunk sizes and logits that
// hf_reference.py wrote (DEEPINFER_HF_REFERENCE) for the checkpoint init-model wrote
// (DEEPINFER_HF_CHECKPOINT), runs our forward one-shot (each prompt alone, as transformers did)
// and chunked / token by token with the same chunk sizes, and checks max |logit difference|
// against the bounds: 1e-3 in float32, 0.05 in bfloat16. Every prompt in one batch, and
// ours chunked against transformers' one-shot, are checked against the same bound in float32 and
// reported in bfloat16. DEEPINFER_HF_TAPS_OUT writes prompt 0's intermediate tensors
// (compare_taps.py). Skips with a message when the variables are unset. DEEPINFER_HF_DEVICE=cpu
// forces the CPU (default: CUDA when available).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/checkpoint_loader.h"
#include "model/deepseek_v4_model.h"
#include "model/expert_parallel.h"
#include "model/forward_batch.h"
#include "model/model_cache.h"
#include "model/reference/transformers_arithmetic.h"
#include "tests/model/forward_test_util.h"

namespace deepinfer::model {
namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

at::Tensor read(const io::SafetensorsFile& file, const std::string& name) {
  const io::TensorView* view = file.find(name);
  TORCH_CHECK(view != nullptr, file.path(), ": no tensor '", name, "'");
  TORCH_CHECK(view->dtype == io::DType::kF32 || view->dtype == io::DType::kI64, file.path(), ": tensor '", name, "' must be F32 or I64");
  at::Tensor t = at::empty(view->shape, at::TensorOptions().dtype(view->dtype == io::DType::kF32 ? at::kFloat : at::kLong));
  std::memcpy(t.data_ptr(), view->data, view->nbytes);
  return t;
}

std::vector<int64_t> to_vector(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

struct Prompt {
  std::vector<int64_t> ids;
  std::vector<int64_t> chunks;
  at::Tensor oneshot;  // [T, V] float32, transformers use_cache=False
  at::Tensor chunked;  // [T, V] float32, transformers use_cache=True over `chunks`
};

// Blocks for one sequence of `tokens` tokens, handed out in reverse so tables are not contiguous.
std::vector<int32_t> block_table(int64_t tokens, int32_t first_block) {
  const int64_t n = (tokens + kBlockTokens - 1) / kBlockTokens;
  std::vector<int32_t> table;
  for (int64_t i = n - 1; i >= 0; --i) table.push_back(first_block + static_cast<int32_t>(i));
  return table;
}

std::vector<int64_t> iota(int64_t begin, int64_t end) {
  std::vector<int64_t> out;
  for (int64_t i = begin; i < end; ++i) out.push_back(i);
  return out;
}

class Runner final {
 public:
  Runner(const ModelWeights& weights, at::ScalarType dtype, at::Device device, const Arithmetic& arith, Observer observer = {})
      : weights_(weights),
        dtype_(dtype),
        device_(device),
        model_(weights, comm_, testing::model_options(arith, AttentionOptions{}.query_tile, std::move(observer))) {}

  // One prompt alone in one forward, as transformers' use_cache=False call runs it.
  at::Tensor oneshot(const Prompt& p) { return batched_oneshot({p}).front(); }

  // Every prompt as one sequence of one batch (one-shot).
  std::vector<at::Tensor> batched_oneshot(const std::vector<Prompt>& prompts) {
    BatchInput in;
    int32_t next_block = 1;
    int64_t rows = 0;
    for (size_t b = 0; b < prompts.size(); ++b) {
      const int64_t n = static_cast<int64_t>(prompts[b].ids.size());
      in.tokens.push_back(prompts[b].ids);
      in.start_positions.push_back(0);
      in.block_tables.push_back(block_table(n, next_block));
      next_block += static_cast<int32_t>(in.block_tables.back().size());
      in.state_slots.push_back(static_cast<int32_t>(prompts.size() - b));  // slots in reverse too
      rows += n;
    }
    in.sample_rows = iota(0, rows);
    ModelCache cache(weights_.config(), ModelCache::Options{next_block, static_cast<int64_t>(prompts.size()) + 1, dtype_, device_});
    const at::Tensor logits = model_.forward(ForwardBatch::build(in, device_), cache).cpu();
    std::vector<at::Tensor> out;
    int64_t row = 0;
    for (const Prompt& p : prompts) {
      out.push_back(logits.narrow(0, row, static_cast<int64_t>(p.ids.size())));
      row += static_cast<int64_t>(p.ids.size());
    }
    return out;
  }

  // One prompt in its chunks (a chunk of 1 is a decode step), through the paged cache.
  at::Tensor chunked(const Prompt& p) {
    const int64_t n = static_cast<int64_t>(p.ids.size());
    const std::vector<int32_t> table = block_table(n, /*first_block=*/1);
    ModelCache cache(weights_.config(), ModelCache::Options{static_cast<int64_t>(table.size()) + 1, 2, dtype_, device_});
    std::vector<at::Tensor> pieces;
    int64_t pos = 0;
    for (int64_t size : p.chunks) {
      BatchInput in;
      in.tokens.push_back(std::vector<int64_t>(p.ids.begin() + pos, p.ids.begin() + pos + size));
      in.start_positions.push_back(pos);
      in.block_tables.push_back(table);
      in.state_slots.push_back(1);
      in.sample_rows = iota(0, size);
      pieces.push_back(model_.forward(ForwardBatch::build(in, device_), cache).cpu());
      pos += size;
    }
    TORCH_CHECK(pos == n, "chunk sizes sum to ", pos, ", prompt has ", n, " tokens");
    return at::cat(pieces, 0);
  }

 private:
  const ModelWeights& weights_;
  at::ScalarType dtype_;
  at::Device device_;
  SingleRankCommunicator comm_;
  DeepseekV4Model model_;
};

double max_diff(const at::Tensor& a, const at::Tensor& b) { return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>(); }

TEST(HfReferenceTest, LogitsMatchTransformers) {
  const std::string reference = env("DEEPINFER_HF_REFERENCE"), checkpoint = env("DEEPINFER_HF_CHECKPOINT");
  if (reference.empty() || checkpoint.empty()) {
    GTEST_SKIP() << "set DEEPINFER_HF_REFERENCE (hf_reference.py --out FILE) and DEEPINFER_HF_CHECKPOINT (the "
                    "init-model folder it read); tests/reference/run_hf_reference.sh BUILD_DIR does both";
  }
  const auto file = io::SafetensorsFile::open(reference);
  const auto& meta = file->metadata();
  ASSERT_TRUE(meta.count("dtype") && meta.count("num_prompts")) << reference << ": metadata lacks dtype / num_prompts";
  const bool fp32 = meta.at("dtype") == "float32";
  ASSERT_TRUE(fp32 || meta.at("dtype") == "bfloat16") << "unknown reference dtype " << meta.at("dtype");
  // DEEPINFER_HF_OURS_DTYPE=bfloat16 against a float32 reference measures our bf16 error against
  // the exact model, apart from transformers' own bf16 rounding (which alone moves its logits by
  // ~1 on the tiny random model). The bound follows our dtype.
  const std::string ours = env("DEEPINFER_HF_OURS_DTYPE");
  ASSERT_TRUE(ours.empty() || ours == "float32" || ours == "bfloat16") << "DEEPINFER_HF_OURS_DTYPE=" << ours;
  const at::ScalarType dtype = ours.empty() ? (fp32 ? at::kFloat : at::kBFloat16) : (ours == "float32" ? at::kFloat : at::kBFloat16);
  const double tolerance = dtype == at::kFloat ? 1e-3 : 0.05;
  // DEEPINFER_HF_OURS_NUMERICS=transformers runs ours with the transformers arithmetic (rounding and
  // summing where transformers does, model/reference/transformers_arithmetic.h): the one switch.
  const std::string numerics_name = env("DEEPINFER_HF_OURS_NUMERICS");
  ASSERT_TRUE(numerics_name.empty() || numerics_name == "official" || numerics_name == "transformers")
      << "DEEPINFER_HF_OURS_NUMERICS=" << numerics_name;
  const Arithmetic& arith = numerics_name == "transformers" ? reference::transformers_arithmetic() : Arithmetic::official();
  const bool cuda = at::hasCUDA() && env("DEEPINFER_HF_DEVICE") != "cpu";
  const at::Device device = cuda ? at::Device(at::kCUDA) : at::Device(at::kCPU);

  LoadReport report;
  const ModelWeights weights = load_checkpoint(checkpoint, LoadOptions{.dtype = dtype, .device = device}, &report);
  std::cout << "[hf_reference] checkpoint " << checkpoint << ": " << report.loaded << " tensors, FP8 linears " << report.format.fp8_linears
            << ", FP4 experts " << report.format.fp4_experts << "; reference " << reference << " (" << meta.at("dtype") << ", transformers "
            << (meta.count("transformers") ? meta.at("transformers") : "?") << ", HF one-shot vs chunked "
            << (meta.count("hf_internal_max_diff") ? meta.at("hf_internal_max_diff") : "?") << "); ours on " << (cuda ? "CUDA" : "CPU")
            << ", numerics " << (numerics_name == "transformers" ? "transformers" : "official") << std::endl;

  std::vector<Prompt> prompts;
  const int64_t n = std::stoll(meta.at("num_prompts"));
  for (int64_t i = 0; i < n; ++i) {
    const std::string p = "prompt." + std::to_string(i) + ".";
    prompts.push_back(Prompt{to_vector(read(*file, p + "ids")), to_vector(read(*file, p + "chunks")), read(*file, p + "logits_oneshot"),
                             read(*file, p + "logits_chunked")});
    ASSERT_EQ(prompts.back().oneshot.size(1), weights.config().vocab_size);
  }

  // DEEPINFER_HF_TAPS_OUT=FILE: one prompt's one-shot intermediate tensors (DeepseekV4Model::Options::
  // observer) as float32 safetensors, for tests/reference/compare_taps.py against hf_reference.py
  // --taps-out; DEEPINFER_HF_TAPS_PROMPT picks the prompt (default 0).
  const std::string taps_out = env("DEEPINFER_HF_TAPS_OUT");
  if (!taps_out.empty()) {
    io::SafetensorsWriter writer;  // add() copies the bytes
    Runner tapped(weights, dtype, device, arith, [&](const std::string& name, const at::Tensor& value) {
      const at::Tensor t = value.detach().to(at::kCPU, at::kFloat).contiguous();
      writer.add(name, io::DType::kF32, std::vector<int64_t>(t.sizes().begin(), t.sizes().end()), t.data_ptr(), t.nbytes());
    });
    const std::string which = env("DEEPINFER_HF_TAPS_PROMPT");
    const size_t index = which.empty() ? 0 : std::stoul(which);
    ASSERT_LT(index, prompts.size()) << "DEEPINFER_HF_TAPS_PROMPT=" << which << ": the reference has " << prompts.size() << " prompts";
    tapped.oneshot(prompts[index]);
    writer.write(taps_out);
    std::cout << "[hf_reference] wrote " << writer.size() << " intermediate tensors of prompt " << index << " to " << taps_out << std::endl;
  }

  // Gated: like for like. Ours one-shot (each prompt alone) against transformers' one-shot, ours
  // chunked / token by token against transformers' run of the same chunks. Also measured: every
  // prompt in one batch, and ours chunked against transformers' one-shot; in float32 they are
  // gated too, in bfloat16 reported next to transformers' own one-shot vs chunked difference
  // (a different matmul shape rounds differently in bfloat16, in transformers as in ours).
  Runner runner(weights, dtype, device, arith);
  const std::vector<at::Tensor> batched = runner.batched_oneshot(prompts);
  const double cross_tolerance = dtype == at::kFloat ? tolerance : std::numeric_limits<double>::infinity();
  double worst = 0, worst_other = 0, hf_self = 0;
  for (int64_t i = 0; i < n; ++i) {
    const Prompt& p = prompts[i];
    const at::Tensor oneshot = runner.oneshot(p);
    const at::Tensor chunked = runner.chunked(p);
    const double d_one = max_diff(oneshot, p.oneshot);
    const double d_chunked = max_diff(chunked, p.chunked);
    const double d_batched = max_diff(batched[i], p.oneshot);
    const double d_cross = max_diff(chunked, p.oneshot);
    const double d_hf = max_diff(p.chunked, p.oneshot);
    worst = std::max({worst, d_one, d_chunked});
    worst_other = std::max({worst_other, d_batched, d_cross});
    hf_self = std::max(hf_self, d_hf);
    std::cout << "[hf_reference] prompt " << i << " (" << p.ids.size() << " tokens, " << p.chunks.size() << " chunks, max|logit| "
              << p.oneshot.abs().max().item<double>() << "): max|diff| one-shot " << d_one << ", chunked " << d_chunked
              << "; ours batched one-shot vs HF one-shot " << d_batched << ", ours chunked vs HF one-shot " << d_cross
              << " (HF chunked vs HF one-shot " << d_hf << ")" << std::endl;
    EXPECT_LE(d_one, tolerance) << "prompt " << i << " one-shot";
    EXPECT_LE(d_chunked, tolerance) << "prompt " << i << " chunked";
    EXPECT_LE(d_batched, cross_tolerance) << "prompt " << i << " batched one-shot";
    EXPECT_LE(d_cross, cross_tolerance) << "prompt " << i << " chunked vs one-shot";
  }
  std::cout << "[hf_reference] " << meta.at("dtype") << ": max |ours - transformers| = " << worst << " (bound " << tolerance
            << "); batched and chunked-vs-one-shot " << worst_other << (dtype == at::kFloat ? " (same bound)" : " (reported)")
            << ", transformers' own chunked vs one-shot " << hf_self << std::endl;
}

}  // namespace
}  // namespace deepinfer::model
