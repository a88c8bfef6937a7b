#pragma once
// The attention projections' RMSNorm and RoPE in one pass (the ATen reference: model/ops.h
// rms_norm, then RopeAngles::apply) over rows x heads vectors of `dim` channels, one warp each:
//  - norm (optional): y = x rsqrt(mean(x^2) + eps), times the weight if there is one, in
//    float32 and rounded to bfloat16, as rms_norm(...) returns it. The sum of squares has one
//    order for a given dim (each lane its channels in order, then a butterfly over the lanes),
//    whatever the number of rows or the vector's place among them.
//  - RoPE (optional) on the last rope_dim channels, interleaved pairs (a, b) of the (normed)
//    bfloat16 values, with RopeAngles' float32 tables C = (cos, cos) and S = (-sin, sin), or
//    (sin, -sin) to de-rotate: (a C0 + b S0, b C1 + a S1), each product and the sum rounded as
//    ATen's separate mul and add round them, then rounded to bfloat16: the bits of apply().
// out may be x (in place); then a pass without norm reads and writes the rotated channels only.
// A vector's result depends on its own inputs only (batch-invariant). Plain CUDA, no torch types.

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace deepinfer::model::cuda {

struct NormRopeArgs {
  const __nv_bfloat16* x = nullptr;    // [rows, heads, dim]
  __nv_bfloat16* out = nullptr;        // [rows, heads, dim], or x
  const float* norm_weight = nullptr;  // [dim] float32, or null: norm_weight_bf16, or no weight
  const __nv_bfloat16* norm_weight_bf16 = nullptr;
  const float* cos = nullptr;  // [rows, rope_dim / 2, 2] (cos, cos); null when rope_dim is 0
  const float* sin = nullptr;  // [rows, rope_dim / 2, 2] (-sin, sin), or (sin, -sin) to de-rotate
  int64_t rows = 0;
  int heads = 0;
  int dim = 0;       // even
  int rope_dim = 0;  // even, at most dim; 0: no RoPE
  bool norm = false;
  float eps = 0.0f;
};

// Vectors go through 16-byte accesses when dim and rope_dim are multiples of 8 (x and out must
// then be 16-byte aligned), else 4-byte ones (4-byte aligned). cudaErrorInvalidValue for
// unsupported sizes, a null or misaligned pointer; else the launch's error.
cudaError_t norm_rope(const NormRopeArgs& args, cudaStream_t stream);

}  // namespace deepinfer::model::cuda
