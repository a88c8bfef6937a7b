#pragma once
// The sampler's noise and exact math as plain ATen ops: the steps of engine/sampler_noise.h,
// element for element, so the results equal the scalar reference bit for bit on CPU and CUDA.
// Owns: tensor versions of exact_log, exact_exp, mix_seed, noise_bits and gumbel_noise.
// Does not own: the specification (sampler_noise.h) or filters and token choice (sampler.h).
//
// Rules that keep the bits fixed on every device and every vector width:
//  - integers are uint32 values held in int64 tensors. A product x * c with x < 2^32 and c an
//    int32 constant satisfies |x * c| < 2^63, and (x * c) & 0xffffffff is x * c mod 2^32 for
//    both signs of c, so no op overflows and no signed-overflow behaviour is relied on;
//  - floats use only +, -, * (alpha never other than +-1, no addcmul: CUDA may fuse those into
//    an FMA), floor, comparisons and where, bit views, and int<->float conversions of exactly
//    representable values. No division by a scalar (CUDA multiplies by the reciprocal instead)
//    and no libm function.
// None of these functions reads tensor data on the host: they queue work on the current stream.

#include <ATen/ATen.h>

#include <cstdint>

namespace deepinfer::engine {

// Elementwise natural log of a float32 tensor whose values are positive, normal and finite.
at::Tensor exact_log(const at::Tensor& x);

// Elementwise e^x of a float32 tensor with values in [kExactExpMin, 0].
at::Tensor exact_exp(const at::Tensor& x);

// seed: [B] int64 (the uint64 seed, bit-cast); position: [B] int64, >= 0.
// Returns keys: [B, 2] int64, the (lo, hi) lanes of mix_seed, each in [0, 2^32).
at::Tensor mix_seed(const at::Tensor& seed, const at::Tensor& position);

// keys: [B, 2] from mix_seed. Returns [B, vocab_size] int64: noise_bits(key_b, token) in [0, 2^32).
at::Tensor noise_bits(const at::Tensor& keys, int64_t vocab_size);

// keys: [B, 2] from mix_seed. Returns [B, vocab_size] float32: gumbel_noise(key_b, token).
// kFused (the default, sample()'s choice) on CUDA in a CUDA build: one fused kernel
// (engine/cuda/gumbel_noise.h) giving the same bits as the ATen ops (checked on the H200 by
// SamplerCuda.FusedNoiseKernelMatchesTheCpuBitForBit); elsewhere it falls back to the ATen ops.
// kAten: the ATen ops everywhere, the reference the kernel is tested against.
enum class NoiseKernel { kAten, kFused };
at::Tensor gumbel_noise(const at::Tensor& keys, int64_t vocab_size, NoiseKernel kernel = NoiseKernel::kFused);

}  // namespace deepinfer::engine
