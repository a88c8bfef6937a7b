// The CUDA kernels and CUDA paths of model/ against their references (label cuda; each test
// skips with a message without a GPU):
//  - the grouped MoE path (moe_grouped.h) against the per-expert loop (moe.cpp) on the same
//    weights and inputs: packed FP4 and dense bfloat16 experts, hash- and score-routed layers,
//    all experts and half of them (the pairs of the other rank's experts must contribute
//    nothing), zero tokens, k = 2 and k = 6, and two runs equal bit for bit;
//  - the Sinkhorn kernel against sinkhorn_reference();
//  - FP8/FP4 quantization on CUDA and the FP4 dequantization kernel against the CPU;
//  - FP8 linears kept as FP8 (cuda::fp8_linear, activations quantized to e4m3) against the same
//    weights dequantized at load, through the whole bfloat16 forward.
#include <gtest/gtest.h>

#include "model/cuda/kernels.h"
#include "model/hyper_connection.h"
#include "model/moe.h"
#include "model/quant.h"
#include "model/random_weights.h"
#include "tests/model/forward_test_util.h"

namespace deepinfer::model {
namespace {

TEST(MoeCuda, GroupedMatchesLoop) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: the grouped path runs only on CUDA";
  const at::Device cuda(at::kCUDA, 0);
  struct Case {
    bool fp4;
    int64_t k;
    std::optional<ExpertRange> range;
  };
  for (const Case& c : {Case{true, 2, {}}, Case{true, 2, ExpertRange{2, 6}}, Case{true, 6, {}}, Case{true, 6, ExpertRange{2, 6}},
                        Case{false, 2, {}}, Case{false, 6, ExpertRange{2, 6}}}) {
    ModelConfig config = tiny_fast_test_config();
    config.num_experts_per_tok = c.k;
    const bool fp4 = c.fp4;
    const std::optional<ExpertRange>& range = c.range;
    const WeightFormat format{io::DType::kBF16, /*fp8_linears=*/false, /*fp4_experts=*/fp4};
    const ModelWeights weights = random_weights(config, format, /*seed=*/11, cuda, range);
    ExpertWorkspace workspace;
    SingleRankCommunicator comm;
    at::Generator gen = at::detail::createCPUGenerator(4);
    for (int64_t tokens : {int64_t{0}, int64_t{1}, int64_t{57}}) {
      const at::Tensor x = at::randn({tokens, config.hidden_size}, gen).to(cuda, at::kBFloat16);
      const at::Tensor ids = at::randint(config.vocab_size, {tokens}, gen).to(cuda);
      for (int64_t layer : {int64_t{0}, int64_t{4}}) {  // hash-routed and score-routed
        if (tokens > 0) {
          ASSERT_TRUE(workspace.usable(weights, layer, x)) << "the grouped path should apply (CUDA build, LibTorch >= 2.8)";
        }
        const at::Tensor grouped = moe_forward(weights, layer, x, ids, comm, Arithmetic::official(), &workspace).to(at::kFloat).cpu();
        // A token's k contributions are summed in a fixed order: a second run gives the same bits.
        EXPECT_TRUE(at::equal(grouped, moe_forward(weights, layer, x, ids, comm, Arithmetic::official(), &workspace).to(at::kFloat).cpu()));
        const at::Tensor loop = moe_forward(weights, layer, x, ids, comm, Arithmetic::official()).to(at::kFloat).cpu();
        ASSERT_EQ(grouped.sizes(), loop.sizes());
        if (tokens == 0) continue;
        const double diff = (grouped - loop).abs().max().item<double>();
        const double scale = loop.abs().max().item<double>();
        std::cout << "[moe_cuda] k " << c.k << ", " << (fp4 ? "FP4" : "bf16") << " experts " << (range ? "[2, 6)" : "all") << ", layer "
                  << layer << ", " << tokens << " tokens: max |grouped - loop| " << diff << " (max |loop| " << scale << ")" << std::endl;
        EXPECT_TRUE(grouped.isfinite().all().item<bool>());
        EXPECT_LE(diff, 0.02 * scale + 1e-3);
      }
    }
  }
}

TEST(SinkhornCuda, KernelMatchesReference) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: the kernel runs only on CUDA";
  at::Generator gen = at::detail::createCPUGenerator(3);
  for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{4}, int64_t{8}}) {
    for (int64_t tokens : {int64_t{0}, int64_t{1}, int64_t{333}}) {
      const at::Tensor logits = (at::randn({tokens, n, n}, gen) * 4).cuda();
      const at::Tensor kernel = sinkhorn(logits, 20, 1e-6).cpu();
      const at::Tensor reference = sinkhorn_reference(logits, 20, 1e-6).cpu();
      ASSERT_EQ(kernel.sizes(), reference.sizes());
      if (tokens == 0) continue;
      const double diff = (kernel - reference).abs().max().item<double>();
      std::cout << "[sinkhorn_cuda] n " << n << ", " << tokens << " tokens: max |kernel - reference| " << diff << std::endl;
      EXPECT_LE(diff, 2e-6) << "n " << n;
    }
  }
}

TEST(QuantCuda, QuantizeAndDequantizeMatchTheCpu) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: the CPU path is covered by the other tests";
  at::manual_seed(3);
  const at::Tensor w = at::randn({130, 200});
  auto [c_cpu, s_cpu] = quantize_fp8_blockwise(w);
  auto [c_gpu, s_gpu] = quantize_fp8_blockwise(w.cuda());
  EXPECT_TRUE(at::equal(c_cpu, c_gpu.cpu()));
  EXPECT_TRUE(at::equal(s_cpu, s_gpu.cpu()));
  EXPECT_TRUE(at::equal(dequant_fp8_blockwise(c_cpu, s_cpu, at::kBFloat16), dequant_fp8_blockwise(c_gpu, s_gpu, at::kBFloat16).cpu()));
  auto [p_cpu, f_cpu] = quantize_fp4(w);
  auto [p_gpu, f_gpu] = quantize_fp4(w.cuda());
  EXPECT_TRUE(at::equal(p_cpu, p_gpu.cpu()));
  EXPECT_TRUE(at::equal(f_cpu, f_gpu.cpu()));
  EXPECT_TRUE(at::equal(dequant_fp4(p_cpu, f_cpu, at::kFloat), dequant_fp4(p_gpu, f_gpu, at::kFloat).cpu()));
}

// The CUDA kernel behind dequant_fp4 for bfloat16 (CUDA build): every byte value and the scale
// edge cases (2^-127, 2^-126, 1, 2, 2^127) give the bits of the ATen path on the CPU; scale
// byte 255 (NaN) gives NaN on both (the NaN bit patterns may differ).
TEST(QuantCuda, Fp4KernelMatchesTheCpuBitwise) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: the CPU path is covered by the other tests";
  const int64_t rows = 40, in = 512;
  const at::Tensor packed = at::remainder(at::arange(rows * in / 2, at::kLong) * 7, 256).to(at::kByte).view({rows, in / 2});
  const at::Tensor scale = at::tensor(std::vector<int64_t>{0, 1, 126, 127, 128, 254, 255, 150}, at::kLong)
                               .repeat({rows * in / kFp4Block / 8})
                               .to(at::kByte)
                               .view({rows, in / kFp4Block});
  const at::Tensor cpu = dequant_fp4(packed, scale, at::kBFloat16);
  const at::Tensor gpu = dequant_fp4(packed.cuda(), scale.cuda(), at::kBFloat16).cpu();
  ASSERT_EQ(gpu.sizes(), cpu.sizes());
  const at::Tensor nan = cpu.isnan();
  EXPECT_TRUE(at::equal(nan, gpu.isnan()));
  EXPECT_GT(nan.sum().item<int64_t>(), 0);  // the 255 blocks
  EXPECT_TRUE(at::equal(cpu.view(at::kShort).masked_fill(nan, 0), gpu.view(at::kShort).masked_fill(nan, 0)));
  const at::Tensor ragged = packed.narrow(1, 0, 100).contiguous();  // in = 200: not a multiple of 32, ATen path
  const at::Tensor ragged_scale = scale.narrow(1, 0, 7).contiguous();
  const at::Tensor ragged_cpu = dequant_fp4(ragged, ragged_scale, at::kBFloat16);
  const at::Tensor ragged_gpu = dequant_fp4(ragged.cuda(), ragged_scale.cuda(), at::kBFloat16).cpu();
  const at::Tensor ragged_nan = ragged_cpu.isnan();  // scale byte 255 again: NaN bits differ between CPU and CUDA ATen
  EXPECT_TRUE(at::equal(ragged_nan, ragged_gpu.isnan()));
  EXPECT_TRUE(at::equal(ragged_cpu.view(at::kShort).masked_fill(ragged_nan, 0), ragged_gpu.view(at::kShort).masked_fill(ragged_nan, 0)));
}

// The kept FP8 linears' forward tracks the dequantized one: the weights are the same values; what
// moves is x, quantized per 128 columns to e4m3 before each FP8 GEMM (as DeepSeek's inference
// does), ~2.7% relative per projection. Every expert and entry selected, so no top-k flips.
TEST(Fp8LinearsCuda, KeptFp8ForwardTracksTheDequantizedForward) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: on the CPU kept FP8 linears are dequantized per call (RandomWeights.*)";
  const at::Device cuda(at::kCUDA, 0);
  ModelConfig config = tiny_fast_test_config();
  config.num_experts_per_tok = config.n_routed_experts;
  config.index_topk = 64;
  config.validate();
  const WeightFormat format{io::DType::kBF16, /*fp8_linears=*/true, /*fp4_experts=*/false};
  const ModelWeights kept = random_weights(config, format, 3, cuda, std::nullopt, /*keep_fp8=*/true);
  const ModelWeights dequantized = random_weights(config, format, 3, cuda);
  const at::Tensor x = at::randn({5, config.hidden_size}, at::TensorOptions(cuda).dtype(at::kBFloat16));
  ASSERT_TRUE(cuda::fp8_linear_supported(x, kept.linear(2, "attn.wq_a").weight, kept.linear(2, "attn.wq_a").scale))
      << "the FP8 GEMM should run here (sm_90, cuBLAS >= 12.9)";
  SingleRankCommunicator comm;
  const std::vector<testing::SeqPlan> plans{{testing::random_tokens(200, config.vocab_size, 9), {}, 1, {1, 2}}};
  ModelCache a(config, {4, 2, at::kBFloat16, cuda}), b(config, {4, 2, at::kBFloat16, cuda});
  const at::Tensor fp8 = testing::run_one_shot(DeepseekV4Model(kept, comm, {}), plans, a, cuda)[0];
  const at::Tensor ref = testing::run_one_shot(DeepseekV4Model(dequantized, comm, {}), plans, b, cuda)[0];
  const double diff = (fp8 - ref).abs().max().item<double>(), scale = ref.abs().max().item<double>();
  std::cout << "[fp8_forward] kept FP8 vs dequantized, 200 tokens: max |diff| " << diff << ", mean "
            << (fp8 - ref).abs().mean().item<double>() << " (max |logit| " << scale << ")" << std::endl;
  EXPECT_TRUE(fp8.isfinite().all().item<bool>());
  EXPECT_LT(diff, 0.2 * scale);
  EXPECT_GT(diff, 0.0) << "the FP8 path should have run (x quantized), not the dequantized one";
}

}  // namespace
}  // namespace deepinfer::model
