// RoPE through Rope::angles / RopeAngles::apply (one cos / sin table per forward, applied as
// pairs * (cos, cos) + swapped pairs * (-sin, sin)) gives the bits of the textbook rotation
// (a cos - b sin, a sin + b cos), forward and inverse, for every layout the layers use.
#include <gtest/gtest.h>

#include <limits>

#include "model/ops.h"

namespace deepinfer::model {
namespace {

// The textbook form, as model/ops.cpp computed it before the table.
at::Tensor textbook(const at::Tensor& x, const at::Tensor& positions, const at::Tensor& inv_freq, bool inverse) {
  const int64_t r = 2 * inv_freq.size(0), dim = x.size(-1);
  const at::Tensor angle = positions.to(at::kFloat).unsqueeze(-1) * inv_freq;
  const at::Tensor cos = angle.cos();
  const at::Tensor sin = inverse ? -angle.sin() : angle.sin();
  std::vector<int64_t> pair_shape(x.sizes().begin(), x.sizes().end() - 1);
  pair_shape.push_back(r / 2);
  pair_shape.push_back(2);
  const at::Tensor pairs = x.narrow(-1, dim - r, r).to(at::kFloat).reshape(pair_shape);
  const at::Tensor a = pairs.select(-1, 0), b = pairs.select(-1, 1);
  const at::Tensor rotated = at::stack({a * cos - b * sin, a * sin + b * cos}, -1).flatten(-2).to(x.scalar_type());
  return r == dim ? rotated : at::cat({x.narrow(-1, 0, dim - r), rotated}, -1);
}

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  const at::ScalarType bits = a.element_size() == 4 ? at::kInt : at::kShort;
  return a.sizes() == b.sizes() && at::equal(a.contiguous().view(bits), b.contiguous().view(bits));
}

TEST(Rope, AnglesTableGivesTheTextbookBits) {
  at::manual_seed(3);
  const Rope rope(rope_inv_freq(64, 160000.0, nullptr));
  const int64_t T = 37;
  const at::Tensor positions = at::randint(0, 1 << 20, {T}, at::kLong);
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    at::Tensor kv = at::randn({T, 96}).to(dtype);  // [T, d]: kv, compressor entries
    kv.index_put_({0}, 0.0);                       // zeros and negative zeros in the rotated part
    kv.index_put_({1}, -0.0);
    const at::Tensor q = at::randn({T, 5, 96}).to(dtype);  // [T, H, d]: q, indexer q, output
    const RopeAngles angles = rope.angles(positions);
    for (const bool inverse : {false, true}) {
      EXPECT_TRUE(same_bits(angles.apply(kv, inverse), textbook(kv, positions, rope.inv_freq(), inverse))) << dtype << inverse;
      EXPECT_TRUE(same_bits(angles.apply(q, inverse), textbook(q, positions.unsqueeze(-1), rope.inv_freq(), inverse))) << dtype << inverse;
      EXPECT_TRUE(
          same_bits(rope.apply(q, positions.unsqueeze(-1), inverse), textbook(q, positions.unsqueeze(-1), rope.inv_freq(), inverse)));
    }
  }
  // A 2-d position grid (the compressor's [B, K] windows) on [B, K, d'].
  const at::Tensor grid = at::randint(0, 4096, {3, 7}, at::kLong);
  const at::Tensor entries = at::randn({3, 7, 64});
  EXPECT_TRUE(same_bits(rope.apply(entries, grid), textbook(entries, grid, rope.inv_freq(), false)));
}

TEST(Rope, ApplyNamesAMismatch) {
  const Rope rope(rope_inv_freq(64, 10000.0, nullptr));
  EXPECT_THROW((void)rope.angles(at::arange(4)).apply(at::zeros({4, 32})), c10::Error);  // dim 32 < rope dim 64
  // Positions line up with x's leading dims: [7] against [3, 7, 64] is refused, not broadcast from the right.
  EXPECT_THROW((void)rope.apply(at::zeros({3, 7, 64}), at::arange(7)), c10::Error);
}

}  // namespace
}  // namespace deepinfer::model
