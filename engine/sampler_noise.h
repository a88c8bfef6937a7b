#pragma once
// The sampler's randomness, specified as scalar C++: the reference that every tensor path
// (engine/sampler_ops.h on CPU and CUDA, any future fused kernel) must match bit for bit.
// Owns: seed derivation for unseeded requests, mix_seed(seed, output position), the
// counter-based hash of (mixed key, token id), the uniform and Gumbel transforms, and
// exact_log / exact_exp, built only from correctly rounded IEEE-754 operations.
// Does not own: tensors, filters or token choice (engine/sampler.h).
//
// Why not std::log / at::log: libm (glibc, SLEEF vector code, CUDA's logf) differ in the last
// bits between CPU and GPU, and even between the vector body and the scalar tail of one CPU
// loop. exact_log / exact_exp use only bit operations, int<->float conversions of exactly
// representable values, and single +, -, * (each rounded once, no fused multiply-add), so every
// conforming implementation gives the same bits. This file is compiled with -ffp-contract=off.
//
// Torch-free on purpose: the pipeline calls derive_request_seed without LibTorch.

#include <cstdint>
#include <string_view>

#include "engine/cuda/noise_math.h"

namespace deepinfer::engine {

// lowbias32 (C. Wellons, hash-prospector): a bijection on uint32 with low avalanche bias.
// The values and the scalar math live in engine/cuda/noise_math.h (host/device code shared with the CUDA kernel).
inline constexpr uint32_t kHashMul1 = noise_math::hash_mul1();  // < 2^31
inline constexpr uint32_t kHashMul2 = noise_math::hash_mul2();  // >= 2^31: as an int32 it is negative
// Initial values of the two 32-bit lanes of mix_seed (golden-ratio and sqrt(3) fractions).
inline constexpr uint32_t kMixIvLo = 0x9e3779b9U;
inline constexpr uint32_t kMixIvHi = 0xbb67ae85U;
// The uniform keeps the top kUniformBits of a noise word: u = (2m + 1) * 2^-24, m < 2^23,
// so u lies in [2^-24, 1 - 2^-24] and every step of the conversion is exact in float32.
inline constexpr int kUniformBits = noise_math::uniform_bits();
// Cephes logf / expf constants, rounded to float once; the tensor path uses the same floats.
inline constexpr float kSqrtHalf = noise_math::sqrt_half();
inline constexpr float kLogPoly[9] = {noise_math::log_poly(0), noise_math::log_poly(1), noise_math::log_poly(2),
                                      noise_math::log_poly(3), noise_math::log_poly(4), noise_math::log_poly(5),
                                      noise_math::log_poly(6), noise_math::log_poly(7), noise_math::log_poly(8)};
inline constexpr float kLn2Hi = noise_math::ln2_hi();  // ln 2 = kLn2Hi + kLn2Lo; kLn2Hi has 9 bits
inline constexpr float kLn2Lo = noise_math::ln2_lo();
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kExpPoly[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                      4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

uint32_t hash32(uint32_t x);

// The stable per-request seed of a request that carries none: FNV-1a 64 over the id's bytes,
// combined with the job seed through the splitmix64 finalizer. Same inputs, same seed, forever.
uint64_t derive_request_seed(uint64_t job_seed, std::string_view request_id);

// The key of one sampling event. Two 32-bit lanes, each a chain of hash32 over the words
// (seed_lo, seed_hi, position_lo, position_hi): lane = h(h(h(h(iv ^ s_lo) ^ s_hi) ^ p_lo) ^ p_hi).
// For a fixed seed, distinct positions below 2^32 give distinct low lanes (each step is a
// bijection), so one sequence never reuses a key. Returns (hi_lane << 32) | lo_lane.
uint64_t mix_seed(uint64_t sequence_seed, uint64_t output_position);

// 32 noise bits for one vocabulary id under one key: h(h(token ^ key_lo) ^ key_hi).
uint32_t noise_bits(uint64_t key, uint32_t token);

// (2 * (bits >> 9) + 1) * 2^-24, in (0, 1).
float uniform_from_bits(uint32_t bits);

// Natural log for positive, normal, finite x (Cephes logf's reduction and polynomial, every
// step a single rounded float op). Within about 2 ulp of the true value. exact_log(1) == 0.
float exact_log(float x);

// e^x for x in [kExactExpMin, 0] (Cephes expf: Cody-Waite reduction, degree-5 polynomial,
// exact scaling by 2^n). Within about 2 ulp. exact_exp(0) == 1.
inline constexpr float kExactExpMin = -80.0f;
float exact_exp(float x);

// -log(-log(u)) of the token's uniform: the Gumbel noise added to logits / temperature.
float gumbel_noise(uint64_t key, uint32_t token);

}  // namespace deepinfer::engine
