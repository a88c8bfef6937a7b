#pragma once
// Small tensor operations shared by the layers: RMSNorm, interleaved partial RoPE (plain or
// YaRN), the clamped SwiGLU MLP. Plain ATen, any device; math per deepseek-v4.md §2.
// Owns: these formulas. Does not own: weights or layer wiring.

#include <ATen/ATen.h>

#include <cstdint>

#include "model/model_config.h"

namespace deepinfer::model {

// w * x * rsqrt(mean(x^2) + eps) over the last dim, computed in float32, returned in x's dtype.
// An undefined weight means no weight.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

// cos and sin of position * inv_freq for one set of positions, laid out for the interleaved
// pairs, so one table serves every tensor roped at those positions (the layer's q, kv, indexer q
// and the de-rotated output). Made by Rope::angles.
class RopeAngles final {
 public:
  // x [P..., extra..., dim] where P is the positions' shape (extra dims broadcast): the last
  // rope_dim channels rotated, (a cos - b sin, a sin + b cos), or by -angle when `inverse`.
  at::Tensor apply(const at::Tensor& x, bool inverse = false) const;
  // The tables apply() multiplies by, [P..., r/2, 2] float32: the pairs by cos_table(), the
  // swapped pairs by sin_table(inverse) (model/cuda/rope.h reads them as they are).
  const at::Tensor& cos_table() const { return cos_; }
  const at::Tensor& sin_table(bool inverse) const { return inverse ? inverse_sin_ : sin_; }

 private:
  friend class Rope;
  at::Tensor cos_;          // [P..., r/2, 2] float32: (cos, cos)
  at::Tensor sin_;          // [P..., r/2, 2] float32: (-sin, sin)
  at::Tensor inverse_sin_;  // [P..., r/2, 2] float32: (sin, -sin)
};

// RoPE on the LAST rope_dim channels as interleaved pairs (x[2i], x[2i+1]):
// (a cos - b sin, a sin + b cos) with angle = position * inv_freq[i]; inverse rotates by -angle.
// Computed as pairs * (cos, cos) + swapped pairs * (-sin, sin), which gives the same bits.
class Rope final {
 public:
  explicit Rope(at::Tensor inv_freq) : inv_freq_(std::move(inv_freq)) {}
  // Ratio-0 layers: base rope_theta, no scaling.
  static Rope main(const ModelConfig& config, at::Device device);
  // Ratio>0 layers (q, window kv, compressor entries, indexer q/k): compress_rope_theta + YaRN.
  static Rope compress(const ModelConfig& config, at::Device device);

  // positions int64 of any shape -> the cos / sin table for them, float32, or rounded to
  // `rounded_to` first (Arithmetic::rope_table_dtype).
  RopeAngles angles(const at::Tensor& positions, at::ScalarType rounded_to = at::kFloat) const;
  // x [..., dim]; positions int64 aligned with x's LEADING dims (x.shape[:k]; a size-1 dim
  // broadcasts, missing trailing dims broadcast), e.g. [T] or [T, 1] for x [T, H, dim].
  at::Tensor apply(const at::Tensor& x, const at::Tensor& positions, bool inverse = false) const;
  const at::Tensor& inv_freq() const { return inv_freq_; }  // [rope_dim / 2] float32
  int64_t rope_dim() const { return 2 * inv_freq_.size(0); }

 private:
  at::Tensor inv_freq_;
};

// [rope_dim / 2] float32: base^(-2i/r), blended with base^(-2i/r)/factor by the YaRN ramp
// when `yarn` is given (no attention scaling).
at::Tensor rope_inv_freq(int64_t rope_dim, double theta, const YarnScaling* yarn);

// The clamped SwiGLU MLP w2(silu(min(x w1^T, limit)) * clamp(x w3^T, -limit, limit)), limit 0 =
// no clamp, from its projections: gate = x w1^T, up = x w3^T [N, I], w2 [D, I] -> [N, D]
// (Arithmetic::swiglu_mlp computes the projections).
at::Tensor swiglu_down(const at::Tensor& gate, const at::Tensor& up, const at::Tensor& w2, double limit);
// What swiglu_down multiplies by w2: silu(min(gate, limit)) * clamp(up, -limit, limit) [N, I].
at::Tensor swiglu_hidden(const at::Tensor& gate, const at::Tensor& up, double limit);

}  // namespace deepinfer::model
