// FP8 linears straight from FP8: cuda::act_quant (model/cuda/act_quant.h) and cuda::fp8_linear
// (model/cuda/fp8_gemm.h, cuBLASLt's block-scaled FP8 GEMM), through model/cuda/kernels.h; label
// cuda, CUDA build only. The act_quant tests skip with a message without a GPU, the fp8_linear
// ones without a GPU of compute capability 9.0 and cuBLASLt 12.9 (the modes are Hopper-only):
//  - act_quant against quant.h's quantize_fp8_activations bit for bit (codes and float32 scales)
//    on rows whose 128-column blocks span 2^-24..2^20 (blocks under the 1e-4 floor, all-zero
//    blocks, partial last blocks) and on rows built on the rounding boundaries (amax = 448 2^e
//    and just above, ties between e4m3 codes, subnormal codes, -0); a row alone gives the bits it
//    gives in a batch of 300;
//  - fp8_linear against the float64 product of the dequantized operands: the weight through
//    quant.h's dequant_fp8_blockwise, the activation as act_quant quantizes it (the bits the GEMM
//    multiplies, pinned above to quantize_fp8_activations evaluated on the CPU; evaluated on CUDA
//    tensors that ATen code is pinned to nothing, so it is no oracle: how many of its codes differ
//    is printed); over the V4 linears' shapes (wq_a 1024 x 4096, wq_b 32768 x 1024,
//    wkv 512 x 4096, wo_b 4096 x 8192, the shared expert's 2048 x 4096 and 4096 x 2048) and
//    ragged ones (N and K not multiples of 128, ceil(K/128) not a multiple of 4), M from 1 to
//    4096 ragged; weight and activation blocks of scales 2^-6..2^2 and 2^-3..2^3, so a scale
//    applied to the wrong block shows. Bound, per element: |out - ref| <= 2^-7 |ref| + 2^-11
//    sum_k |x_k w_k| (the bfloat16 rounding of the output is 2^-9 |ref|; the tensor cores sum
//    each 128-column block's e4m3 products in a narrower accumulator before the float32
//    promotion, DeepSeek-V3's report puts it at ~14 bits: 2^-11 of the absolute sum leaves
//    room), ||out - ref|| / ||ref|| <= 4e-3, no NaN;
//  - fp8_linear bit for bit on data that quantizes exactly, with scales up to 2^14 apart from row
//    to row and 2^8 from N block to N block (a scale read from the wrong row, block or padding is
//    off by whole powers of two);
//  - leading dimensions, zero rows, repeatability, and the shapes it must refuse, with a message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "model/cuda/kernels.h"
#include "model/quant.h"

namespace deepinfer::model::testing {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// [rows, cols] float32 normal values times 2^u per block of row_block x 128, u uniform in [lo, hi].
at::Tensor blocky(int64_t rows, int64_t cols, int64_t row_block, int64_t lo, int64_t hi, at::Generator& gen, at::Device device) {
  const at::TensorOptions f32 = at::TensorOptions().dtype(at::kFloat).device(device);
  const int64_t rb = ceil_div(rows, row_block), cb = ceil_div(cols, 128);
  const at::Tensor u = at::randint(lo, hi + 1, {rb, 1, cb, 1}, gen, f32);
  const at::Tensor scale =
      at::pow(2.0, u).expand({rb, row_block, cb, 128}).reshape({rb * row_block, cb * 128}).narrow(0, 0, rows).narrow(1, 0, cols);
  return at::randn({rows, cols}, gen, f32) * scale;
}

class ActQuantCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: the activation quantizer runs only on CUDA";
  }
  const at::Device cuda_{at::kCUDA, 0};
};

// The kernel's codes and scales against the reference's, bit for bit.
void expect_reference_bits(const at::Tensor& x, const std::string& what) {
  ASSERT_TRUE(cuda::act_quant_supported(x)) << what;
  const cuda::Fp8Activations q = cuda::act_quant(x);
  const auto [codes, scales] = quantize_fp8_activations(x.cpu());
  ASSERT_EQ(q.codes.sizes(), codes.sizes()) << what;
  ASSERT_EQ(q.scales.sizes(), scales.sizes()) << what;
  const at::Tensor got_codes = q.codes.cpu(), got_scales = q.scales.cpu();
  const int64_t code_diffs = got_codes.ne(codes).sum().item<int64_t>();
  const int64_t scale_diffs = got_scales.ne(scales).sum().item<int64_t>();
  EXPECT_EQ(code_diffs, 0) << what << ": codes differ from quantize_fp8_activations";
  EXPECT_EQ(scale_diffs, 0) << what << ": scales differ from quantize_fp8_activations";
  std::cout << "[act_quant] " << what << ": " << code_diffs << " codes and " << scale_diffs << " scales differ" << std::endl;
}

TEST_F(ActQuantCuda, MatchesTheReferenceBitForBit) {
  at::Generator gen = cuda::make_generator(/*seed=*/21, cuda_);
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 128},    {3, 4096},  {4, 1024}, {5, 400}, {64, 2048},
                                                           {257, 8192}, {1000, 16}, {33, 260}, {2, 4},   {4096, 1024}};
  for (const auto& [rows, cols] : shapes) {
    at::Tensor x = blocky(rows, cols, 1, -24, 20, gen, cuda_);
    if (cols > 128) x.narrow(1, 128, std::min<int64_t>(128, cols - 128)).zero_();  // an all-zero block in every row
    expect_reference_bits(x.to(at::kBFloat16), std::to_string(rows) + " x " + std::to_string(cols));
  }
}

TEST_F(ActQuantCuda, MatchesTheReferenceOnRoundingBoundaries) {
  std::vector<float> v(3 * 384, 0.0f);
  float* r0 = v.data();
  // Block 0: amax exactly 448 2^-5 (scale 2^-5); ties of e4m3 codes and subnormal codes at that scale.
  const float s = std::ldexp(1.0f, -5);
  const std::vector<float> block0 = {448.0f, 1.0625f, 1.1875f, -1.0625f, std::ldexp(1.0f, -10), 3 * std::ldexp(1.0f, -10), -300.0f, 17.0f};
  for (size_t i = 0; i < block0.size(); ++i) r0[i] = block0[i] * s;
  r0[8] = -0.0f;
  // Block 1: amax just above 448 2^3 (scale 2^4); block 2 stays zero (the floor's scale).
  r0[128] = 3600.0f;
  r0[129] = -3584.0f;
  r0[130] = 0.5f;
  // Row 1: every value under the 1e-4 floor; row 2: amax exactly at powers of two times 448.
  for (int i = 0; i < 384; ++i) v[384 + i] = (i % 2 ? -1.0f : 1.0f) * 1e-7f * static_cast<float>(i);
  for (int b = 0; b < 3; ++b) v[768 + 128 * b] = 448.0f * std::ldexp(1.0f, 4 * b - 6);
  for (int i = 1; i < 128; ++i) v[768 + i] = static_cast<float>(i) * 0.01f;
  const at::Tensor x = at::from_blob(v.data(), {3, 384}, at::TensorOptions().dtype(at::kFloat)).clone().to(at::kBFloat16).to(cuda_);
  expect_reference_bits(x, "boundary rows");
}

TEST_F(ActQuantCuda, RowsDoNotDependOnTheBatch) {
  at::Generator gen = cuda::make_generator(/*seed=*/22, cuda_);
  const at::Tensor x = blocky(300, 4096, 1, -8, 8, gen, cuda_).to(at::kBFloat16);
  const cuda::Fp8Activations all = cuda::act_quant(x);
  for (const int64_t r : {0, 1, 3, 4, 150, 299}) {
    const cuda::Fp8Activations one = cuda::act_quant(x.narrow(0, r, 1));
    EXPECT_TRUE(at::equal(one.codes[0], all.codes[r])) << "row " << r;
    EXPECT_TRUE(at::equal(one.scales[0], all.scales[r])) << "row " << r;
  }
  // Leading dimensions: [2, 150, K] gives the [300, K] bits.
  const cuda::Fp8Activations shaped = cuda::act_quant(x.view({2, 150, 4096}));
  EXPECT_TRUE(at::equal(shaped.codes.reshape({300, 4096}), all.codes));
  EXPECT_TRUE(at::equal(shaped.scales.reshape({300, 32}), all.scales));
}

// The weight as the loader would hold it, and its float64 dequantization.
struct Fp8Weight {
  at::Tensor codes;        // [N, K] uint8 e4m3
  at::Tensor scale;        // [ceil(N/128), ceil(K/128)] float32: the e8m0 scales decoded
  at::Tensor dequantized;  // [N, K] float64
};

Fp8Weight random_weight(int64_t n, int64_t k, at::Generator& gen, at::Device device) {
  const auto [codes, e8m0] = quantize_fp8_blockwise(blocky(n, k, 128, -6, 2, gen, device));
  Fp8Weight w;
  w.codes = codes;
  w.scale = e8m0_table(device).index_select(0, e8m0.reshape({-1}).to(at::kLong)).view(e8m0.sizes());
  w.dequantized = dequant_fp8_blockwise(codes, e8m0, at::kDouble);
  return w;
}

// act_quant's codes [M, K] and scales [M, ceil(K/128)] dequantized: [M, K] float64.
at::Tensor dequantized(const cuda::Fp8Activations& q) {
  const int64_t K = q.codes.size(1);
  const at::Tensor values = e4m3_table(q.codes.device()).index_select(0, q.codes.reshape({-1}).to(at::kLong)).view(q.codes.sizes());
  return values.to(at::kDouble) * q.scales.to(at::kDouble).repeat_interleave(128, 1).narrow(1, 0, K);
}

class Fp8LinearCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: the FP8 linear runs only on CUDA";
    const at::Tensor x = at::zeros({1, 128}, at::TensorOptions().dtype(at::kBFloat16).device(cuda_));
    const at::Tensor w = at::zeros({128, 128}, at::TensorOptions().dtype(at::kByte).device(cuda_));
    const at::Tensor s = at::ones({1, 1}, at::TensorOptions().dtype(at::kFloat).device(cuda_));
    if (!cuda::fp8_linear_supported(x, w, s))
      GTEST_SKIP() << "cuBLASLt's block-scaled FP8 GEMM needs a GPU of compute capability 9.0 (Hopper) and cuBLASLt 12.9 or later";
  }
  const at::Device cuda_{at::kCUDA, 0};
};

struct Shape {
  const char* name;
  int64_t n, k;
};

void check_shape(const Shape& shape, const std::vector<int64_t>& row_counts, at::Generator& gen, at::Device device) {
  const Fp8Weight w = random_weight(shape.n, shape.k, gen, device);
  for (const int64_t m : row_counts) {
    const at::Tensor x = blocky(m, shape.k, 1, -3, 3, gen, device).to(at::kBFloat16);
    ASSERT_TRUE(cuda::fp8_linear_supported(x, w.codes, w.scale)) << shape.name;
    const at::Tensor out = cuda::fp8_linear(x, w.codes, w.scale);
    ASSERT_EQ(out.sizes(), at::IntArrayRef({m, shape.n}));
    ASSERT_EQ(out.scalar_type(), at::kBFloat16);
    // The GEMM's operand: fp8_linear quantizes x as act_quant does (ActQuantCuda pins those bits).
    const cuda::Fp8Activations q = cuda::act_quant(x);
    const at::Tensor xq = dequantized(q);
    const int64_t cuda_reference_diffs = quantize_fp8_activations(x).first.ne(q.codes).sum().item<int64_t>();
    const at::Tensor ref = at::matmul(xq, w.dequantized.t());
    const at::Tensor bound = ref.abs() * std::ldexp(1.0, -7) + at::matmul(xq.abs(), w.dequantized.abs().t()) * std::ldexp(1.0, -11);
    const at::Tensor got = out.to(at::kDouble);
    const at::Tensor err = (got - ref).abs();
    const bool nan = at::isnan(got).any().item<bool>();
    const int64_t outside = (err > bound).sum().item<int64_t>();
    const double worst = (err / bound.clamp_min(1e-300)).max().item<double>();
    const double relative = (got - ref).norm().item<double>() / ref.norm().item<double>();
    std::cout << "[fp8_linear] " << shape.name << ", M " << m << " x N " << shape.n << " x K " << shape.k << ": |out - ref| / |ref| "
              << relative << ", worst error / bound " << worst << ", " << outside
              << " elements outside; quantize_fp8_activations on CUDA: " << cuda_reference_diffs << " codes differ from act_quant's"
              << std::endl;
    EXPECT_FALSE(nan) << shape.name << " M " << m;
    EXPECT_EQ(outside, 0) << shape.name << " M " << m;
    EXPECT_LE(relative, 4e-3) << shape.name << " M " << m;
  }
}

const std::vector<int64_t> kRowCounts = {1, 2, 3, 4, 5, 17, 64, 100, 255, 256, 257, 1000, 4096};

TEST_F(Fp8LinearCuda, MatchesTheDequantizedReferenceOnTheV4Shapes) {
  at::Generator gen = cuda::make_generator(/*seed=*/31, cuda_);
  const std::vector<Shape> shapes = {
      {"attn.wq_a (q_lora)", 1024, 4096},     {"attn.wq_b", 32768, 1024},       {"attn.wkv", 512, 4096}, {"attn.wo_b", 4096, 8192},
      {"shared_experts.w1 / w3", 2048, 4096}, {"shared_experts.w2", 4096, 2048}};
  for (const Shape& shape : shapes) check_shape(shape, kRowCounts, gen, cuda_);
}

// N and K not multiples of 128 (partial last blocks), ceil(K/128) not a multiple of 4 (the
// binding pads the weight's scales for cuBLASLt's stride), the smallest shape.
TEST_F(Fp8LinearCuda, MatchesTheDequantizedReferenceOnRaggedShapes) {
  at::Generator gen = cuda::make_generator(/*seed=*/32, cuda_);
  const std::vector<Shape> shapes = {
      {"ragged", 200, 400}, {"ragged, 3 K blocks", 136, 272}, {"ragged, 9 K blocks", 1000, 1040}, {"smallest", 8, 16}};
  for (const Shape& shape : shapes) check_shape(shape, kRowCounts, gen, cuda_);
}

// x is 2^(r(m) + (m + b) % 2) on row m and K block b, w is 2^(t(n / 128) + (n / 128 + b) % 2): every
// block quantizes exactly (codes 256, scales 2^(exponent - 8)), the block products and their
// float32 sum are exact with at most 7 significant bits, so the output is the exact product bit
// for bit. Scales differ up to 2^14 between rows (r), 2^8 between N blocks (t), 2 between K blocks.
// M 6 and 5 (padding rows of scale 1), N 264 (a partial N block), K 272 (a partial K block, 3 K
// blocks: the binding pads the weight's scale stride to 4) and K 1024 (scales used in place).
TEST_F(Fp8LinearCuda, AppliesEveryBlocksOwnScaleExactly) {
  const std::vector<int> row_exponent = {-6, 0, 5, -2, 3, 7};
  const std::vector<int> n_block_exponent = {-4, 3, 0};
  struct Case {
    int64_t m, n, k;
  };
  for (const Case c : {Case{6, 264, 272}, Case{5, 384, 1024}}) {
    std::vector<float> xv(c.m * c.k), wv(c.n * c.k);
    for (int64_t r = 0; r < c.m; ++r)
      for (int64_t k = 0; k < c.k; ++k) xv[r * c.k + k] = std::ldexp(1.0f, row_exponent[r] + static_cast<int>((r + k / 128) % 2));
    for (int64_t n = 0; n < c.n; ++n)
      for (int64_t k = 0; k < c.k; ++k)
        wv[n * c.k + k] = std::ldexp(1.0f, n_block_exponent[n / 128] + static_cast<int>((n / 128 + k / 128) % 2));
    const at::TensorOptions f32 = at::TensorOptions().dtype(at::kFloat);
    const at::Tensor x = at::from_blob(xv.data(), {c.m, c.k}, f32).to(cuda_).to(at::kBFloat16);
    const at::Tensor w = at::from_blob(wv.data(), {c.n, c.k}, f32).to(cuda_);
    const auto [codes, e8m0] = quantize_fp8_blockwise(w);
    const at::Tensor scale = e8m0_table(cuda_).index_select(0, e8m0.reshape({-1}).to(at::kLong)).view(e8m0.sizes());
    const at::Tensor out = cuda::fp8_linear(x, codes, scale);
    const at::Tensor ref = at::matmul(x.to(at::kDouble), w.to(at::kDouble).t());  // exact, and exact in bfloat16
    const int64_t differ = out.ne(ref.to(at::kBFloat16)).sum().item<int64_t>();
    const double worst = ((out.to(at::kDouble) - ref).abs() / ref.abs()).max().item<double>();
    std::cout << "[fp8_linear] exact scales, M " << c.m << " x N " << c.n << " x K " << c.k << ": " << differ
              << " elements differ, worst relative error " << worst << std::endl;
    EXPECT_EQ(differ, 0) << "M " << c.m << " N " << c.n << " K " << c.k;
  }
}

TEST_F(Fp8LinearCuda, LeadingDimensionsZeroRowsAndRepeatability) {
  at::Generator gen = cuda::make_generator(/*seed=*/33, cuda_);
  const Fp8Weight w = random_weight(512, 4096, gen, cuda_);
  const at::Tensor x = blocky(6, 4096, 1, -3, 3, gen, cuda_).to(at::kBFloat16);
  const at::Tensor flat = cuda::fp8_linear(x, w.codes, w.scale);
  EXPECT_TRUE(at::equal(flat, cuda::fp8_linear(x, w.codes, w.scale))) << "two calls differ";
  const at::Tensor shaped = cuda::fp8_linear(x.view({2, 3, 4096}), w.codes, w.scale);
  ASSERT_EQ(shaped.sizes(), at::IntArrayRef({2, 3, 512}));
  EXPECT_TRUE(at::equal(shaped.reshape({6, 512}), flat));
  const at::Tensor none = cuda::fp8_linear(x.narrow(0, 0, 0), w.codes, w.scale);
  EXPECT_EQ(none.sizes(), at::IntArrayRef({0, 512}));
}

TEST_F(Fp8LinearCuda, RefusesWhatCublasLtCannotTakeWithAMessage) {
  const at::TensorOptions bf16 = at::TensorOptions().dtype(at::kBFloat16).device(cuda_);
  const at::TensorOptions u8 = at::TensorOptions().dtype(at::kByte).device(cuda_);
  const at::TensorOptions f32 = at::TensorOptions().dtype(at::kFloat).device(cuda_);
  struct Refused {
    const char* why;
    at::Tensor x, w, s;
  };
  const std::vector<Refused> cases = {
      {"K not a multiple of 16", at::zeros({4, 100}, bf16), at::zeros({64, 100}, u8), at::ones({1, 1}, f32)},
      {"N not a multiple of 8", at::zeros({4, 128}, bf16), at::zeros({100, 128}, u8), at::ones({1, 1}, f32)},
      {"scales of the wrong shape", at::zeros({4, 256}, bf16), at::zeros({128, 256}, u8), at::ones({1, 1}, f32)},
      {"float32 x", at::zeros({4, 128}, f32), at::zeros({128, 128}, u8), at::ones({1, 1}, f32)},
      {"a transposed weight", at::zeros({4, 128}, bf16), at::zeros({128, 256}, u8).t(), at::ones({2, 1}, f32)},
      {"x on the CPU", at::zeros({4, 128}, at::kBFloat16), at::zeros({128, 128}, u8), at::ones({1, 1}, f32)},
  };
  for (const Refused& c : cases) {
    EXPECT_FALSE(cuda::fp8_linear_supported(c.x, c.w, c.s)) << c.why;
    try {
      (void)cuda::fp8_linear(c.x, c.w, c.s);
      ADD_FAILURE() << c.why << ": fp8_linear did not throw";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("cuda::fp8_linear"), std::string::npos) << c.why << ": " << e.what();
    }
  }
}

}  // namespace
}  // namespace deepinfer::model::testing
