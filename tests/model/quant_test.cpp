// FP8 e4m3 / FP4 e2m1 / e8m0 decoding and encoding against values computed by hand.
#include "model/quant.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace deepinfer::model {
namespace {

at::Tensor bytes(std::vector<uint8_t> values, std::vector<int64_t> shape) {
  return at::from_blob(values.data(), shape, at::TensorOptions().dtype(at::kByte)).clone();
}

at::Tensor floats(std::vector<float> values, std::vector<int64_t> shape) {
  return at::from_blob(values.data(), shape, at::TensorOptions().dtype(at::kFloat)).clone();
}

float at1(const at::Tensor& t, int64_t i) { return t.reshape({-1})[i].item<float>(); }

TEST(QuantTest, E4m3TableByHand) {
  const at::Tensor t = e4m3_table(at::kCPU);
  EXPECT_EQ(at1(t, 0x00), 0.0f);
  EXPECT_FALSE(std::signbit(at1(t, 0x00)));
  EXPECT_EQ(at1(t, 0x80), 0.0f);
  EXPECT_TRUE(std::signbit(at1(t, 0x80)));  // negative zero
  EXPECT_EQ(at1(t, 0x01), 0.001953125f);    // smallest subnormal 1/8 * 2^-6 = 2^-9
  EXPECT_EQ(at1(t, 0x07), 0.013671875f);    // largest subnormal 7 * 2^-9
  EXPECT_EQ(at1(t, 0x08), 0.015625f);       // smallest normal 2^-6
  EXPECT_EQ(at1(t, 0x87), -0.013671875f);
  EXPECT_EQ(at1(t, 0x38), 1.0f);
  EXPECT_EQ(at1(t, 0x3C), 1.5f);
  EXPECT_EQ(at1(t, 0x40), 2.0f);
  EXPECT_EQ(at1(t, 0x77), 240.0f);  // 1.875 * 2^7
  EXPECT_EQ(at1(t, 0x7E), 448.0f);  // largest finite
  EXPECT_EQ(at1(t, 0xFE), -448.0f);
  EXPECT_TRUE(std::isnan(at1(t, 0x7F)));
  EXPECT_TRUE(std::isnan(at1(t, 0xFF)));
  EXPECT_EQ(at::isnan(t).sum().item<int64_t>(), 2);  // no other NaN, no infinities
  EXPECT_EQ(at::isinf(t).sum().item<int64_t>(), 0);
}

TEST(QuantTest, E8m0AndE2m1TablesByHand) {
  const at::Tensor s = e8m0_table(at::kCPU);
  EXPECT_EQ(at1(s, 127), 1.0f);
  EXPECT_EQ(at1(s, 128), 2.0f);
  EXPECT_EQ(at1(s, 126), 0.5f);
  EXPECT_EQ(at1(s, 0), std::ldexp(1.0f, -127));  // fp32 subnormal, must not flush to zero
  EXPECT_GT(at1(s, 0), 0.0f);
  EXPECT_EQ(at1(s, 254), std::ldexp(1.0f, 127));
  EXPECT_TRUE(std::isnan(at1(s, 255)));
  const at::Tensor f = e2m1_table(at::kCPU);
  const std::vector<float> expected = {0, .5, 1, 1.5, 2, 3, 4, 6, -0.0f, -.5, -1, -1.5, -2, -3, -4, -6};
  for (int i = 0; i < 16; ++i) EXPECT_EQ(at1(f, i), expected[i]) << "code " << i;
  EXPECT_TRUE(std::signbit(at1(f, 8)));
}

TEST(QuantTest, DequantFp8AppliesBlockScalesWithRaggedEdges) {
  // weight [3, 5], block 2 -> scale [2, 3]; every code is 1.0 (0x38) except two.
  std::vector<uint8_t> w(15, 0x38);
  w[0] = 0x7E;                                                             // 448 at (0,0)
  w[14] = 0x81;                                                            // -2^-9 at (2,4), a subnormal
  const at::Tensor scale = bytes({127, 128, 130, 120, 255, 125}, {2, 3});  // 1, 2, 8 / 2^-7, NaN, 1/4
  const at::Tensor out = dequant_fp8_blockwise(bytes(w, {3, 5}), scale, at::kFloat, /*block=*/2);
  ASSERT_EQ(out.sizes(), at::IntArrayRef({3, 5}));
  const float expected_block[2][3] = {{1, 2, 8}, {0.0078125f, NAN, 0.25f}};
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 5; ++c) {
      const float got = out[r][c].item<float>();
      float want = expected_block[r / 2][c / 2];
      if (r == 0 && c == 0) want *= 448;
      if (r == 2 && c == 4) want *= -0.001953125f;
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << r << "," << c;
      } else {
        EXPECT_EQ(got, want) << r << "," << c;
      }
    }
  }
}

TEST(QuantTest, DequantFp8ToBf16IsExactAndChecksShapes) {
  const at::Tensor w = bytes({0x7E, 0xFE, 0x01, 0x80}, {2, 2});
  const at::Tensor out = dequant_fp8_blockwise(w, bytes({131}, {1, 1}), at::kBFloat16);  // scale 16
  EXPECT_EQ(out.scalar_type(), at::kBFloat16);
  EXPECT_EQ(out[0][0].item<float>(), 7168.0f);
  EXPECT_EQ(out[0][1].item<float>(), -7168.0f);
  EXPECT_EQ(out[1][0].item<float>(), 0.03125f);  // 2^-9 * 16
  EXPECT_TRUE(std::signbit(out[1][1].item<float>()));
  EXPECT_THROW(dequant_fp8_blockwise(w, bytes({127, 127}, {1, 2}), at::kFloat), c10::Error);
  EXPECT_THROW(dequant_fp8_blockwise(w.to(at::kFloat), bytes({127}, {1, 1}), at::kFloat), c10::Error);
}

TEST(QuantTest, DequantFp4LowNibbleIsEvenColumn) {
  // One row, in = 4: bytes 0x21 -> (0.5, 1.0), 0x8F -> (-6, -0).
  const at::Tensor out = dequant_fp4(bytes({0x21, 0x8F}, {1, 2}), bytes({128}, {1, 1}), at::kFloat);
  ASSERT_EQ(out.sizes(), at::IntArrayRef({1, 4}));
  EXPECT_EQ(out[0][0].item<float>(), 1.0f);  // 0.5 * 2
  EXPECT_EQ(out[0][1].item<float>(), 2.0f);
  EXPECT_EQ(out[0][2].item<float>(), -12.0f);
  EXPECT_EQ(out[0][3].item<float>(), 0.0f);
  EXPECT_TRUE(std::signbit(out[0][3].item<float>()));
}

TEST(QuantTest, DequantFp4ScalesPer32ColumnsWithRaggedEdge) {
  // [2, 40]: 20 packed bytes per row, scale [2, 2] (columns 0..31, 32..39). All codes 6 / -6.
  std::vector<uint8_t> packed(40, 0xF7);                       // low 7 (+6), high F (-6)
  const at::Tensor scale = bytes({127, 129, 0, 255}, {2, 2});  // 1, 4 / 2^-127, NaN
  const at::Tensor out = dequant_fp4(bytes(packed, {2, 20}), scale, at::kFloat);
  ASSERT_EQ(out.sizes(), at::IntArrayRef({2, 40}));
  for (int c = 0; c < 40; ++c) {
    const float sign = (c % 2 == 0) ? 1.0f : -1.0f;
    EXPECT_EQ(out[0][c].item<float>(), sign * 6 * (c < 32 ? 1 : 4)) << c;
    if (c < 32) {
      EXPECT_EQ(out[1][c].item<float>(), sign * 6 * std::ldexp(1.0f, -127)) << c;
    } else {
      EXPECT_TRUE(std::isnan(out[1][c].item<float>())) << c;
    }
  }
  EXPECT_THROW(dequant_fp4(bytes(packed, {2, 20}), bytes({127, 127}, {2, 1}), at::kFloat), c10::Error);
}

TEST(QuantTest, QuantizeFp8ScaleEdgeCases) {
  // block 1: every element is its own block, scale = 2^ceil(log2(amax / 448)).
  const float tiny = std::ldexp(1.5f, -127);  // fp32 subnormal, below 448 * 2^-127
  const at::Tensor w = floats({448, 1, 449, 0, 56, -1, 56.0001f, -0.0f, tiny, 0}, {5, 2});
  auto [codes, scale] = quantize_fp8_blockwise(w, /*block=*/1);
  ASSERT_EQ(scale.sizes(), at::IntArrayRef({5, 2}));
  ASSERT_EQ(codes.sizes(), at::IntArrayRef({5, 2}));
  const std::vector<uint8_t> want_scale = {127, 119, 128, 127, 124, 119, 125, 127, 0, 127};
  const std::vector<uint8_t> want_code = {
      0x7E,  // 448 / 1
      0x78,  // 1 / 2^-8 = 256
      0x76,  // 449 / 2 = 224.5 -> 224
      0x00,  // zero block keeps scale 1
      0x7E,  // 56 = 448 / 8 exactly -> scale 2^-3, code 448
      0xF8,  // -1 -> -256
      0x76,  // 56.0001 / 2^-2 = 224.0004 -> 224
      0x80,  // -0 keeps its sign
      0x3C,  // scale clamps to 2^-127: 1.5 * 2^-127 / 2^-127 = 1.5
      0x00,
  };
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(scale.reshape({-1})[i].item<uint8_t>(), want_scale[i]) << "element " << i;
    EXPECT_EQ(codes.reshape({-1})[i].item<uint8_t>(), want_code[i]) << "element " << i;
  }
  EXPECT_THROW(quantize_fp8_blockwise(floats({1, NAN}, {1, 2})), c10::Error);
  EXPECT_THROW(quantize_fp8_blockwise(floats({1, INFINITY}, {1, 2})), c10::Error);
}

TEST(QuantTest, QuantizeFp8RoundsToNearestEven) {
  // One ragged block (block 128 > [1, 8]) with amax 448 -> scale 1.
  const float sub = std::ldexp(1.0f, -10);
  const at::Tensor w = floats({448, 1.0625f, 1.1875f, sub, 3 * sub, 15 * sub, -448, 1.07f}, {1, 8});
  auto [codes, scale] = quantize_fp8_blockwise(w);
  ASSERT_EQ(scale.sizes(), at::IntArrayRef({1, 1}));
  EXPECT_EQ(scale.item<uint8_t>(), 127);
  const std::vector<uint8_t> want = {
      0x7E,  // 448
      0x38,  // 1.0625: tie of 1.0 (0x38) and 1.125 (0x39) -> even 0x38
      0x3A,  // 1.1875: tie of 1.125 (0x39) and 1.25 (0x3A) -> even 0x3A
      0x00,  // 2^-10: tie of 0 and the smallest subnormal 2^-9 -> 0
      0x02,  // 3 * 2^-10: tie of 2^-9 (0x01) and 2^-8 (0x02) -> 0x02
      0x08,  // 7.5 * 2^-9: tie of the largest subnormal (0x07) and 2^-6 (0x08) -> 0x08
      0xFE,  // -448
      0x39,  // 1.07 is nearer 1.125 than 1.0
  };
  for (int i = 0; i < 8; ++i) EXPECT_EQ(codes[0][i].item<uint8_t>(), want[i]) << "column " << i;
}

TEST(QuantTest, QuantizeFp4ByHand) {
  // [1, 40]: block 0 (columns 0..31) has amax 6 -> scale 1; block 1 (32..39) has amax 7 -> 2^1.
  std::vector<float> w(40, 0.0f);
  const std::vector<float> head = {6, -6, 0.25f, 0.75f, 2.5f, 5, 3.5f, -0.0f, 1.25f, 0};
  std::copy(head.begin(), head.end(), w.begin());
  w[32] = 7;
  w[33] = -1;
  auto [packed, scale] = quantize_fp4(floats(w, {1, 40}));
  ASSERT_EQ(packed.sizes(), at::IntArrayRef({1, 20}));
  ASSERT_EQ(scale.sizes(), at::IntArrayRef({1, 2}));
  EXPECT_EQ(scale[0][0].item<uint8_t>(), 127);
  EXPECT_EQ(scale[0][1].item<uint8_t>(), 128);
  // (6 -> 7, -6 -> 15), (0.25 tie -> 0, 0.75 tie -> 1.0 = 2), (2.5 tie -> 2.0 = 4, 5 tie -> 4.0 = 6),
  // (3.5 tie -> 4.0 = 6, -0 -> 8), (1.25 tie -> 1.0 = 2, 0 -> 0); block 1: (3.5 -> 6, -0.5 -> 9).
  const std::vector<uint8_t> want = {0xF7, 0x20, 0x64, 0x86, 0x02};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(packed[0][i].item<uint8_t>(), want[i]) << "byte " << i;
  EXPECT_EQ(packed[0][16].item<uint8_t>(), 0x96);
  const at::Tensor back = dequant_fp4(packed, scale, at::kFloat);
  EXPECT_EQ(back[0][32].item<float>(), 8.0f);
  EXPECT_EQ(back[0][33].item<float>(), -1.0f);
  EXPECT_TRUE(std::signbit(back[0][7].item<float>()));
  EXPECT_THROW(quantize_fp4(floats({1, 2, 3}, {1, 3})), c10::Error);
}

// Relative spacing of e4m3 is 2^-3, so rounding errs by at most 2^-4 |x| in the normal range and
// by half a subnormal step (2^-10 * scale) below it.
TEST(QuantTest, Fp8RoundTripErrorBound) {
  at::manual_seed(7);
  const at::Tensor w = at::randn({300, 260}) * at::rand({300, 1}) * 3;  // ragged: 300 and 260 vs 128
  auto [codes, scale] = quantize_fp8_blockwise(w);
  ASSERT_EQ(scale.sizes(), at::IntArrayRef({3, 3}));
  const at::Tensor back = dequant_fp8_blockwise(codes, scale, at::kFloat);
  const at::Tensor s = e8m0_table(at::kCPU).index_select(0, scale.reshape({-1}).to(at::kLong)).view({3, 3});
  const at::Tensor s_full = s.repeat_interleave(128, 0).narrow(0, 0, 300).repeat_interleave(128, 1).narrow(1, 0, 260);
  const at::Tensor bound = at::maximum(w.abs() * 0.0625, s_full * std::ldexp(1.0, -10));
  EXPECT_TRUE(((back - w).abs() <= bound).all().item<bool>()) << "max err " << (back - w).abs().max().item<float>();
  // The scale is the smallest power of two that fits: every block's amax lands in (224, 448] codes.
  const at::Tensor ratio = w.abs().div(s_full);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      const float amax = ratio.narrow(0, i * 128, std::min<int64_t>(128, 300 - i * 128))
                             .narrow(1, j * 128, std::min<int64_t>(128, 260 - j * 128))
                             .max()
                             .item<float>();
      EXPECT_GT(amax, 224.0f);
      EXPECT_LE(amax, 448.0f);
    }
  }
  // Dequantized values are representable: quantizing them again reproduces them exactly.
  auto [codes2, scale2] = quantize_fp8_blockwise(back);
  EXPECT_TRUE(at::equal(dequant_fp8_blockwise(codes2, scale2, at::kFloat), back));
}

TEST(QuantTest, Fp4RoundTripErrorBound) {
  at::manual_seed(11);
  const at::Tensor w = at::randn({2, 5, 72});  // leading expert dim; 72 = 2 full blocks + 8
  auto [packed, scale] = quantize_fp4(w);
  ASSERT_EQ(packed.sizes(), at::IntArrayRef({2, 5, 36}));
  ASSERT_EQ(scale.sizes(), at::IntArrayRef({2, 5, 3}));
  const at::Tensor back = dequant_fp4(packed, scale, at::kFloat);
  const at::Tensor s =
      e8m0_table(at::kCPU).index_select(0, scale.reshape({-1}).to(at::kLong)).view({2, 5, 3}).repeat_interleave(32, 2).narrow(2, 0, 72);
  // Grid steps 0.5 / 1 / 2 below 2 / 4 / 6: error <= max(0.25, |x|/4 in code units) * scale.
  const at::Tensor bound = at::maximum(s * 0.25, w.abs() * 0.25);
  EXPECT_TRUE(((back - w).abs() <= bound).all().item<bool>()) << "max err " << (back - w).abs().max().item<float>();
  auto [packed2, scale2] = quantize_fp4(back);
  EXPECT_TRUE(at::equal(dequant_fp4(packed2, scale2, at::kFloat), back));
}

// quantize_fp8_activations (DeepSeek-V4's act_quant, the CUDA kernel's reference).

// The e4m3 code whose value is exactly v (-0.0 gives 0x80).
int code_of(float v) {
  const at::Tensor t = e4m3_table(at::kCPU);
  for (int b = 0; b < 256; ++b) {
    const float c = t[b].item<float>();
    if (c == v && std::signbit(c) == std::signbit(v)) return b;
  }
  return -1;
}

TEST(QuantTest, QuantizeFp8ActivationsScalesAndTiesByHand) {
  std::vector<float> row(260, 0.0f);  // blocks [0, 128), [128, 256) (all zero), [256, 260) (partial)
  row[0] = 448.0f;                    // amax 448: scale 2^0
  row[1] = 1.0625f;                   // midway 1 | 1.125: the even code, 1
  row[2] = 1.1875f;                   // midway 1.125 | 1.25: the even code, 1.25
  row[3] = -0.0f;
  row[4] = std::ldexp(1.0f, -10);      // midway 0 | 2^-9: 0
  row[5] = 3 * std::ldexp(1.0f, -10);  // midway 2^-9 | 2^-8: 2^-8 (code 2)
  row[6] = -300.0f;                    // e4m3 step 32 above 256: 288 | 320, nearer 288
  row[256] = 450.0f;                   // amax 450: scale 2, 450 / 2 = 225 -> 224
  row[257] = -5.0f;                    // -2.5
  std::vector<float> small(260, 0.0f);
  small[10] = 5e-5f;  // amax under the floor: scale 2^ceil(log2(1e-4 / 448)) = 2^-22
  std::vector<float> both(row);
  both.insert(both.end(), small.begin(), small.end());
  const at::Tensor x = floats(both, {2, 260}).to(at::kBFloat16);
  const auto [codes, scales] = quantize_fp8_activations(x);
  ASSERT_EQ(codes.sizes(), at::IntArrayRef({2, 260}));
  ASSERT_EQ(scales.sizes(), at::IntArrayRef({2, 3}));
  EXPECT_EQ(codes.scalar_type(), at::kByte);
  EXPECT_EQ(scales.scalar_type(), at::kFloat);
  EXPECT_EQ(at1(scales, 0), 1.0f);
  EXPECT_EQ(at1(scales, 1), std::ldexp(1.0f, -22));  // all zero: the floor's scale
  EXPECT_EQ(at1(scales, 2), 2.0f);
  EXPECT_EQ(at1(scales, 3), std::ldexp(1.0f, -22));
  const auto code = [&](int64_t i) { return static_cast<int>(codes.reshape({-1})[i].item<uint8_t>()); };
  EXPECT_EQ(code(0), 0x7E);
  EXPECT_EQ(code(1), code_of(1.0f));
  EXPECT_EQ(code(2), code_of(1.25f));
  EXPECT_EQ(code(3), 0x80);
  EXPECT_EQ(code(4), 0x00);
  EXPECT_EQ(code(5), 0x02);
  EXPECT_EQ(code(6), code_of(-288.0f));
  EXPECT_EQ(code(7), 0x00);
  EXPECT_EQ(code(256), code_of(224.0f));
  EXPECT_EQ(code(257), code_of(-2.5f));
  // 5e-5 in bfloat16 is 1.640625 2^-15; times 2^22 that is 210: e4m3 steps of 16 there, 208.
  EXPECT_EQ(code(260 + 10), code_of(208.0f));
}

TEST(QuantTest, QuantizeFp8ActivationsRoundTripRowsIndependent) {
  at::manual_seed(12);
  // Blocks of very different magnitudes, some under the 1e-4 floor; 400 = 3 full blocks + 16.
  const at::Tensor magnitude = at::pow(2.0, at::randint(-24, 20, {6, 1, 4, 1})).expand({6, 1, 4, 128}).reshape({6, 512});
  const at::Tensor x = (at::randn({6, 512}) * magnitude).narrow(1, 0, 400).to(at::kBFloat16).reshape({2, 3, 400});
  const auto [codes, scales] = quantize_fp8_activations(x);
  ASSERT_EQ(codes.sizes(), at::IntArrayRef({2, 3, 400}));
  ASSERT_EQ(scales.sizes(), at::IntArrayRef({2, 3, 4}));
  const at::Tensor xf = x.to(at::kDouble).reshape({6, 400});
  const at::Tensor s = scales.to(at::kDouble).reshape({6, 4});
  const at::Tensor values = e4m3_table(at::kCPU).index_select(0, codes.reshape({-1}).to(at::kLong)).view({6, 400}).to(at::kDouble);
  const at::Tensor back = values * s.repeat_interleave(128, 1).narrow(1, 0, 400);
  for (int64_t r = 0; r < 6; ++r) {
    for (int64_t b = 0; b < 4; ++b) {
      const int64_t width = std::min<int64_t>(128, 400 - b * 128);
      const double amax = std::max(xf[r].narrow(0, b * 128, width).abs().max().item<double>(), double{kFp8ActAmaxFloor});
      const double scale = s[r][b].item<double>();
      int e = 0;
      EXPECT_EQ(std::frexp(scale, &e), 0.5) << "scale " << scale << " is not a power of two";
      EXPECT_LE(amax, 448.0 * scale) << "row " << r << " block " << b;
      EXPECT_GT(amax, 224.0 * scale) << "row " << r << " block " << b;
    }
  }
  // e4m3 keeps 3 mantissa bits: within 2^-4 of |x| relative, or the subnormal step 2^-9 scaled.
  const at::Tensor step = s.repeat_interleave(128, 1).narrow(1, 0, 400) * std::ldexp(1.0, -10);
  EXPECT_TRUE(((back - xf).abs() <= at::maximum(xf.abs() * (1.0 / 16), step)).all().item<bool>());
  for (int64_t r = 0; r < 6; ++r) {
    const auto [one_codes, one_scales] = quantize_fp8_activations(x.reshape({6, 400}).narrow(0, r, 1));
    EXPECT_TRUE(at::equal(one_codes[0], codes.reshape({6, 400})[r])) << "row " << r;
    EXPECT_TRUE(at::equal(one_scales[0], scales.reshape({6, 4})[r])) << "row " << r;
  }
}

// One definition of the ue8m0 scale and the rounding: a single row whose blocks all reach the
// floor quantizes as quantize_fp8_blockwise quantizes it (its 128 x 128 blocks are 1 x 128 there).
TEST(QuantTest, QuantizeFp8ActivationsAgreesWithTheWeightQuantizer) {
  at::manual_seed(13);
  const at::Tensor x = (at::randn({1, 1000}) * 37).to(at::kBFloat16);
  const auto [codes, scales] = quantize_fp8_activations(x);
  const auto [w_codes, w_scale] = quantize_fp8_blockwise(x);
  EXPECT_TRUE(at::equal(codes, w_codes));
  EXPECT_TRUE(at::equal(scales, e8m0_table(at::kCPU).index_select(0, w_scale.reshape({-1}).to(at::kLong)).view(scales.sizes())));
}

// The CUDA kernel (model/cuda/act_quant.cu) computes the scale as the official kernel does,
// 2^ceil(log2(amax * float32(1/448))) from the float32's bits; the reference as the smallest e
// with 448 2^e >= amax. Every positive finite bfloat16 amax gives the same scale both ways.
TEST(QuantTest, QuantizeFp8ActivationsScaleIsTheOfficialBitFormula) {
  std::vector<float> values;
  for (uint32_t bits = 1; bits < 0x7F80; ++bits) {
    const uint32_t word = bits << 16;
    float v;
    std::memcpy(&v, &word, sizeof(v));
    values.push_back(v);
  }
  const int64_t n = static_cast<int64_t>(values.size());
  const auto [codes, scales] = quantize_fp8_activations(floats(values, {n, 1}).to(at::kBFloat16));
  const at::Tensor got = scales.reshape({-1});
  int64_t differ = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float amax = std::max(values[static_cast<size_t>(i)], kFp8ActAmaxFloor) * (1.0f / 448.0f);
    uint32_t word;
    std::memcpy(&word, &amax, sizeof(word));
    const int e = static_cast<int>((word >> 23) & 0xFF) - 127 + ((word & 0x7FFFFF) != 0 ? 1 : 0);
    if (got[i].item<float>() != std::ldexp(1.0f, e)) ++differ;
  }
  EXPECT_EQ(differ, 0) << "of " << n << " bfloat16 values";
}

}  // namespace
}  // namespace deepinfer::model
