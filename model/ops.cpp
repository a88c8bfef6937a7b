#include "model/ops.h"

#include <cmath>

namespace deepinfer::model {

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor inv = at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  at::Tensor y = xf * inv;
  if (weight.defined()) y = y * weight.to(at::kFloat);
  return y.to(x.scalar_type());
}

at::Tensor rope_inv_freq(int64_t rope_dim, double theta, const YarnScaling* yarn) {
  TORCH_CHECK(rope_dim > 0 && rope_dim % 2 == 0, "rope_inv_freq: rope_dim must be positive and even, got ", rope_dim);
  const int64_t half = rope_dim / 2;
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  // Same float32 arithmetic as the references: 1 / base^(arange(0, r, 2) / r).
  at::Tensor freq = 1.0 / at::pow(theta, at::arange(0, rope_dim, 2, f32) / static_cast<double>(rope_dim));
  if (yarn == nullptr || yarn->factor == 1.0) return freq;
  const double r = static_cast<double>(rope_dim);
  const double two_pi = 2.0 * M_PI;
  auto correction_dim = [&](double rotations) {
    return r * std::log(static_cast<double>(yarn->original_max_position_embeddings) / (rotations * two_pi)) / (2.0 * std::log(theta));
  };
  const double low = std::max(std::floor(correction_dim(yarn->beta_fast)), 0.0);
  double high = std::min(std::ceil(correction_dim(yarn->beta_slow)), r - 1.0);
  if (high == low) high += 0.001;
  const at::Tensor ramp = ((at::arange(half, f32) - low) / (high - low)).clamp(0.0, 1.0);
  return freq / yarn->factor * ramp + freq * (1.0 - ramp);
}

Rope Rope::main(const ModelConfig& config, at::Device device) {
  return Rope(rope_inv_freq(config.rope_head_dim, config.rope_theta, nullptr).to(device));
}

Rope Rope::compress(const ModelConfig& config, at::Device device) {
  return Rope(rope_inv_freq(config.rope_head_dim, config.compress_rope_theta, &config.yarn).to(device));
}

RopeAngles Rope::angles(const at::Tensor& positions, at::ScalarType rounded_to) const {
  const at::Tensor angle = positions.to(at::kFloat).unsqueeze(-1) * inv_freq_;  // [P..., r/2]
  at::Tensor cos = angle.cos(), sin = angle.sin();
  if (rounded_to != at::kFloat) {
    cos = cos.to(rounded_to).to(at::kFloat);
    sin = sin.to(rounded_to).to(at::kFloat);
  }
  RopeAngles out;
  out.cos_ = at::stack({cos, cos}, -1);
  out.sin_ = at::stack({-sin, sin}, -1);
  out.inverse_sin_ = at::stack({sin, -sin}, -1);
  return out;
}

at::Tensor Rope::apply(const at::Tensor& x, const at::Tensor& positions, bool inverse) const { return angles(positions).apply(x, inverse); }

at::Tensor RopeAngles::apply(const at::Tensor& x, bool inverse) const {
  const int64_t r = 2 * cos_.size(-2);
  const int64_t dim = x.size(-1);
  const int64_t position_dims = cos_.dim() - 2;
  TORCH_CHECK(dim >= r, "RopeAngles::apply: last dim ", dim, " is smaller than the rope dim ", r);
  TORCH_CHECK(x.dim() - 1 >= position_dims, "RopeAngles::apply: x has ", x.dim(), " dims, positions ", position_dims);
  for (int64_t i = 0; i < position_dims; ++i) {
    TORCH_CHECK(cos_.size(i) == x.size(i) || cos_.size(i) == 1, "RopeAngles::apply: positions ", cos_.sizes().slice(0, position_dims),
                " do not line up with the leading dims of x ", x.sizes());
  }
  std::vector<int64_t> pair_shape(x.sizes().begin(), x.sizes().end() - 1);
  pair_shape.push_back(r / 2);
  pair_shape.push_back(2);
  // The table's positions align with x's leading dims; x's further dims broadcast.
  std::vector<int64_t> table_shape(cos_.sizes().begin(), cos_.sizes().begin() + position_dims);
  table_shape.insert(table_shape.end(), x.dim() - 1 - position_dims, 1);
  table_shape.push_back(r / 2);
  table_shape.push_back(2);
  const at::Tensor pairs = x.narrow(-1, dim - r, r).to(at::kFloat).reshape(pair_shape);
  // (a, b) * (cos, cos) + (b, a) * (-sin, sin) = (a cos - b sin, b cos + a sin): the same bits as
  // the textbook form (negation is exact, addition commutes).
  const at::Tensor rotated =
      (pairs * cos_.view(table_shape) + pairs.flip(-1) * (inverse ? inverse_sin_ : sin_).view(table_shape)).flatten(-2).to(x.scalar_type());
  if (r == dim) return rotated;
  return at::cat({x.narrow(-1, 0, dim - r), rotated}, -1);
}

at::Tensor swiglu_down(const at::Tensor& gate, const at::Tensor& up, const at::Tensor& w2, double limit) {
  return at::linear(swiglu_hidden(gate, up, limit), w2);
}

at::Tensor swiglu_hidden(const at::Tensor& gate, const at::Tensor& up, double limit) {
  if (limit <= 0) return at::silu(gate) * up;
  return at::silu(gate.clamp_max(limit)) * up.clamp(-limit, limit);
}

}  // namespace deepinfer::model
