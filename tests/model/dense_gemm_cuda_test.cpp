// The batch-invariant dense GEMMs (model/cuda/dense_gemm.h, through cuda::invariant_linear) on the
// GPU (label cuda; each test skips with a message without one):
//  - against at::linear in float64, M 1, 3, 17, 64, 255, 256, 1000 and 4096 rows on V4-Flash's
//    linears, the tiny model's and odd sizes, bfloat16 and float32 outputs. Bound, per element:
//    |y - ref| <= r |ref| + a sum_k |x w| (r: 2^-8 for bfloat16 outputs, their rounding, else 0;
//    a: 5e-4 for the tensor cores' float32 sums over K / 16 steps, 5e-5 for the float32 kernels'
//    chunked fma chains), and ||y - ref|| / ||ref|| <= 5e-3 (bfloat16 out) or 1e-4 (float32 out);
//    no NaN (the output's memory is all ones, a NaN pattern, before the call);
//  - a strided x and a 3-D x give the bits of their contiguous 2-D copy;
//  - a row's bits do not depend on the batch: the row alone equals the row at a random position
//    among 1..512 and 4,095 random other rows (every tile configuration's range of M), every bit;
//  - the same for the float32 kernels (router and mHC shapes);
//  - the grouped form (invariant_group_linear) against float64, and its rows alone vs in batches;
//  - shapes the kernels do not take are refused with a message saying what they need.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "model/cuda/kernels.h"

namespace deepinfer::model::testing {
namespace {

struct Shape {
  const char* name;
  int64_t n, k;
};

// V4-Flash's dense linears (D 4096).
const std::vector<Shape> kV4Shapes = {{"q_lora (wq_a)", 1024, 4096}, {"wq_b", 64 * 512, 1024},        {"wkv", 512, 4096},
                                      {"wo_b", 4096, 8192},          {"shared w1/w3", 2048, 4096},    {"shared w2", 4096, 2048},
                                      {"head", 129280, 4096},        {"indexer wq_b", 64 * 128, 1024}};
// The tiny model's, and sizes that are no multiple of any tile.
const std::vector<Shape> kSmallShapes = {{"tiny wq_b", 512, 128}, {"tiny wkv", 64, 256},   {"tiny indexer weights", 16, 256},
                                         {"tiny w2", 256, 128},   {"tiny head", 512, 256}, {"tiny wo_b", 256, 256},
                                         {"odd", 100, 96},        {"one feature", 1, 32},  {"24 features", 24, 64}};
// The float32 kernels' users: the router and the mHC projection, V4-Flash and tiny, and odd sizes.
const std::vector<Shape> kF32Shapes = {{"router", 256, 4096},  {"mHC", 24, 16384}, {"tiny router", 8, 256},
                                       {"tiny mHC", 24, 1024}, {"odd", 10, 100},   {"one feature", 1, 4}};
const std::vector<int64_t> kRows = {1, 3, 17, 64, 255, 256, 1000, 4096};

at::TensorOptions on(at::Device device, at::ScalarType type) { return at::TensorOptions(device).dtype(type); }

// Normal values times e^(2 N(0, 1)): a wide range of magnitudes, so that a change in the order
// of a sum shows in its bits.
at::Tensor spread(std::vector<int64_t> sizes, at::ScalarType type, at::Device device) {
  const at::Tensor base = at::randn(sizes, on(device, at::kFloat));
  return (base * (at::randn(sizes, base.options()) * 2.0).exp()).to(type);
}

// The kernels' output with the memory it lands in first set to all ones (NaN in bfloat16 and
// float32), so that an element they do not write shows.
at::Tensor linear_into_poison(const at::Tensor& x, const at::Tensor& w, at::ScalarType out_dtype) {
  const int64_t bytes = x.numel() / x.size(-1) * w.size(0) * (out_dtype == at::kFloat ? 4 : 2);
  { const at::Tensor poison = at::full({bytes}, 255, on(x.device(), at::kByte)); }
  return cuda::invariant_linear(x, w, out_dtype);
}

struct Reference {
  at::Tensor w, w_abs;  // float64
};

void expect_close(const char* what, const Shape& s, int64_t m, const at::Tensor& y, const at::Tensor& ref, const at::Tensor& abs_dot,
                  double rounding, double accumulation, double frobenius) {
  const at::Tensor yd = y.to(at::kDouble), diff = (yd - ref).abs();
  const bool finite = at::isfinite(yd).all().item<bool>();
  const double worst = (diff / (rounding * ref.abs() + accumulation * abs_dot + 1e-300)).max().item<double>();
  const double relative = diff.norm().item<double>() / std::max(ref.norm().item<double>(), 1e-300);
  std::printf("[dense_gemm] %-6s %-22s N %6ld K %5ld M %4ld: |y - ref| / bound %.3f, ||y - ref|| / ||ref|| %.2e\n", what, s.name,
              static_cast<long>(s.n), static_cast<long>(s.k), static_cast<long>(m), worst, relative);
  EXPECT_TRUE(finite) << what << " " << s.name << " M " << m << ": NaN or unwritten elements";
  EXPECT_LE(worst, 1.0) << what << " " << s.name << " M " << m;
  EXPECT_LE(relative, frobenius) << what << " " << s.name << " M " << m;
}

// Every M of kRows against float64 for one shape; bfloat16 inputs check both output types.
void check_shape(const Shape& s, at::ScalarType type, at::Device device) {
  const at::Tensor w = spread({s.n, s.k}, type, device);
  const Reference r{w.to(at::kDouble), w.abs().to(at::kDouble)};
  for (const int64_t m : kRows) {
    const at::Tensor x = spread({m, s.k}, type, device);
    const at::Tensor ref = at::linear(x.to(at::kDouble), r.w), abs_dot = at::linear(x.abs().to(at::kDouble), r.w_abs);
    ASSERT_TRUE(cuda::invariant_linear_supported(x, w)) << s.name;
    if (type == at::kBFloat16) {
      expect_close("bf16", s, m, linear_into_poison(x, w, at::kBFloat16), ref, abs_dot, std::ldexp(1.0, -8), 5e-4, 5e-3);
      expect_close("bf16>f", s, m, linear_into_poison(x, w, at::kFloat), ref, abs_dot, 0.0, 5e-4, 1e-4);
    } else {
      expect_close("f32", s, m, linear_into_poison(x, w, at::kFloat), ref, abs_dot, 0.0, 5e-5, 1e-4);
    }
  }
}

class InvariantLinearCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: the invariant linears run only on CUDA";
  }
  const at::Device cuda_{at::kCUDA, 0};
};

TEST_F(InvariantLinearCuda, Bf16MatchesFloat64OnV4Shapes) {
  at::manual_seed(1);
  for (const Shape& s : kV4Shapes) check_shape(s, at::kBFloat16, cuda_);
}

TEST_F(InvariantLinearCuda, Bf16MatchesFloat64OnSmallShapes) {
  at::manual_seed(2);
  for (const Shape& s : kSmallShapes) check_shape(s, at::kBFloat16, cuda_);
}

TEST_F(InvariantLinearCuda, F32MatchesFloat64) {
  at::manual_seed(3);
  for (const Shape& s : kF32Shapes) check_shape(s, at::kFloat, cuda_);
}

// A strided x (rows of K + 64 values, starting 32 values in) and a 3-D x are read in place or
// copied; either way the bits are those of the contiguous 2-D x.
TEST_F(InvariantLinearCuda, StridedAndBatchedXGiveTheContiguousBits) {
  at::manual_seed(4);
  for (const at::ScalarType type : {at::kBFloat16, at::kFloat}) {
    const int64_t K = 1024, N = 384;
    const at::Tensor w = spread({N, K}, type, cuda_);
    const at::Tensor wide = spread({300, K + 64}, type, cuda_), x = wide.narrow(1, 32, K);
    EXPECT_TRUE(at::equal(cuda::invariant_linear(x, w, at::kFloat), cuda::invariant_linear(x.contiguous(), w, at::kFloat)))
        << "strided x, " << type;
    const at::Tensor x3 = spread({2, 150, K}, type, cuda_);
    const at::Tensor y3 = cuda::invariant_linear(x3, w, at::kFloat);
    EXPECT_EQ(y3.sizes(), at::IntArrayRef({2, 150, N}));
    EXPECT_TRUE(at::equal(y3.reshape({300, N}), cuda::invariant_linear(x3.reshape({300, K}), w, at::kFloat))) << "3-D x, " << type;
  }
}

// A probe row alone, then at a random row among `others` random rows: the same bits.
void check_batch_invariance(const Shape& s, at::ScalarType type, at::ScalarType out_dtype, at::Device device, std::mt19937& rng) {
  const at::Tensor w = spread({s.n, s.k}, type, device), probe = spread({1, s.k}, type, device);
  const at::Tensor alone = cuda::invariant_linear(probe, w, out_dtype);
  for (const int64_t others : {1, 2, 7, 15, 16, 17, 31, 63, 64, 65, 100, 127, 128, 129, 200, 255, 256, 300, 383, 511, 512, 4095}) {
    const at::Tensor rest = spread({others, s.k}, type, device);
    const int64_t place = std::uniform_int_distribution<int64_t>(0, others)(rng);
    const at::Tensor x = at::cat({rest.narrow(0, 0, place), probe, rest.narrow(0, place, others - place)});
    const at::Tensor batch = cuda::invariant_linear(x, w, out_dtype);
    EXPECT_TRUE(at::equal(batch[place], alone[0]))
        << s.name << " (N " << s.n << ", K " << s.k << ", " << type << " -> " << out_dtype << "): the row among " << others
        << " others at row " << place << " (plan " << cuda::invariant_linear_plan(others + 1, w) << ") differs from the row alone (plan "
        << cuda::invariant_linear_plan(1, w) << ")";
  }
}

TEST_F(InvariantLinearCuda, Bf16RowsBitsDoNotDependOnTheBatch) {
  at::manual_seed(5);
  std::mt19937 rng(11);
  for (const Shape& s : {kV4Shapes[0], kV4Shapes[2], kV4Shapes[3], kV4Shapes[6], kSmallShapes[1], kSmallShapes[2], kSmallShapes[6]}) {
    check_batch_invariance(s, at::kBFloat16, at::kBFloat16, cuda_, rng);
    check_batch_invariance(s, at::kBFloat16, at::kFloat, cuda_, rng);
  }
}

TEST_F(InvariantLinearCuda, F32RowsBitsDoNotDependOnTheBatch) {
  at::manual_seed(6);
  std::mt19937 rng(12);
  for (const Shape& s : kF32Shapes) check_batch_invariance(s, at::kFloat, at::kFloat, cuda_, rng);
}

// The grouped form (the output projection's wo_a: G 8, N 1024, K 4096; the tiny model's; an odd
// N): within the bound of invariant_linear's bfloat16 test against float64, and a probe token's
// row alone equals its row at a random place among others, every bit.
TEST_F(InvariantLinearCuda, GroupsMatchFloat64AndTheirRowsDoNotDependOnTheBatch) {
  at::manual_seed(7);
  std::mt19937 rng(13);
  struct GroupShape {
    int64_t g, n, k;
  };
  for (const GroupShape& s : {GroupShape{8, 1024, 4096}, GroupShape{2, 128, 256}, GroupShape{3, 100, 96}}) {
    const Shape named{"groups", s.n, s.k};
    const at::Tensor w = spread({s.g, s.n, s.k}, at::kBFloat16, cuda_), probe = spread({1, s.g, s.k}, at::kBFloat16, cuda_);
    const at::Tensor alone = cuda::invariant_group_linear(probe, w);
    ASSERT_EQ(alone.sizes(), at::IntArrayRef({1, s.g * s.n}));
    for (const int64_t others : {0, 63, 144, 999, 4095}) {
      const at::Tensor rest = spread({others, s.g, s.k}, at::kBFloat16, cuda_);
      const int64_t place = std::uniform_int_distribution<int64_t>(0, others)(rng);
      const at::Tensor x = at::cat({rest.narrow(0, 0, place), probe, rest.narrow(0, place, others - place)});
      const at::Tensor y = cuda::invariant_group_linear(x, w);
      EXPECT_TRUE(at::equal(y[place], alone[0])) << "G " << s.g << " N " << s.n << " K " << s.k << ": the row among " << others
                                                 << " others at row " << place << " differs from the row alone";
      const at::Tensor xd = x.to(at::kDouble).transpose(0, 1), wd = w.to(at::kDouble).transpose(1, 2);  // [G, T, K], [G, K, N]
      const at::Tensor ref = at::bmm(xd, wd).transpose(0, 1).reshape({others + 1, s.g * s.n});
      const at::Tensor abs_dot = at::bmm(xd.abs(), wd.abs()).transpose(0, 1).reshape({others + 1, s.g * s.n});
      expect_close("group", named, others + 1, y, ref, abs_dot, std::ldexp(1.0, -8), 5e-4, 5e-3);
    }
  }
}

// invariant_linear(x, w, out_dtype) must throw with a message containing `needle`; where the
// operands themselves are what the kernels cannot take, invariant_linear_supported says so too.
void expect_refused(const at::Tensor& x, const at::Tensor& w, at::ScalarType out_dtype, const std::string& needle, bool operands) {
  if (operands) {
    EXPECT_FALSE(cuda::invariant_linear_supported(x, w)) << needle;
  }
  try {
    cuda::invariant_linear(x, w, out_dtype);
    ADD_FAILURE() << "accepted: " << needle;
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST_F(InvariantLinearCuda, RefusesWhatTheKernelsDoNotTake) {
  const auto bf16 = on(cuda_, at::kBFloat16), f32 = on(cuda_, at::kFloat);
  expect_refused(at::randn({4, 48}, bf16), at::randn({8, 48}, bf16), at::kBFloat16, "multiple of 32", true);
  expect_refused(at::randn({4, 6}, f32), at::randn({8, 6}, f32), at::kFloat, "multiple of 4", true);
  expect_refused(at::randn({4, 64}, bf16), at::randn({8, 64}, f32), at::kFloat, "both bfloat16 or both float32", true);
  expect_refused(at::randn({4, 64}, bf16), at::randn({64, 8}, bf16).t(), at::kFloat, "unit inner stride", true);
  expect_refused(at::randn({4, 64}, bf16).cpu(), at::randn({8, 64}, bf16), at::kFloat, "one CUDA device", true);
  expect_refused(at::randn({4, 64}, f32), at::randn({8, 64}, f32), at::kBFloat16, "inputs give float32", false);
}

}  // namespace
}  // namespace deepinfer::model::testing
