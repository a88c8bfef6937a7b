#pragma once
// The scalar noise math of engine/sampler_noise.h as inline host/device functions: one source for the
// CPU reference (sampler_noise.cpp) and the fused CUDA kernel (engine/cuda/gumbel_noise.cu).
// Both are compiled without fused multiply-add (-ffp-contract=off on the host, --fmad=false in
// nvcc), so every float operation rounds once and the bits agree. The polynomial coefficients
// are constexpr functions because device code cannot read namespace-scope arrays.

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define DEEPINFER_HD __host__ __device__
#else
#define DEEPINFER_HD
#endif

namespace deepinfer::engine::noise_math {

DEEPINFER_HD constexpr uint32_t hash_mul1() { return 0x7feb352dU; }
DEEPINFER_HD constexpr uint32_t hash_mul2() { return 0x846ca68bU; }
DEEPINFER_HD constexpr int uniform_bits() { return 23; }
DEEPINFER_HD constexpr float sqrt_half() { return 0.707106781186547524f; }
DEEPINFER_HD constexpr float ln2_hi() { return 0.693359375f; }
DEEPINFER_HD constexpr float ln2_lo() { return -2.12194440e-4f; }
// Cephes logf's polynomial, highest degree first.
DEEPINFER_HD constexpr float log_poly(int i) {
  switch (i) {
    case 0: return 7.0376836292e-2f;
    case 1: return -1.1514610310e-1f;
    case 2: return 1.1676998740e-1f;
    case 3: return -1.2420140846e-1f;
    case 4: return 1.4249322787e-1f;
    case 5: return -1.6668057665e-1f;
    case 6: return 2.0000714765e-1f;
    case 7: return -2.4999993993e-1f;
    default: return 3.3333331174e-1f;
  }
}

// std::bit_cast for host and device code (memcpy compiles to a register move on both).
template <typename To, typename From>
DEEPINFER_HD inline To bit_cast(From x) {
  static_assert(sizeof(To) == sizeof(From));
  To y;
  memcpy(&y, &x, sizeof y);
  return y;
}

DEEPINFER_HD inline uint32_t hash32(uint32_t x) {
  x ^= x >> 16;
  x *= hash_mul1();
  x ^= x >> 15;
  x *= hash_mul2();
  x ^= x >> 16;
  return x;
}

DEEPINFER_HD inline uint32_t noise_bits(uint64_t key, uint32_t token) {
  const uint32_t x = hash32(token ^ static_cast<uint32_t>(key));
  return hash32(x ^ static_cast<uint32_t>(key >> 32));
}

DEEPINFER_HD inline float uniform_from_bits(uint32_t bits) {
  const uint32_t m = bits >> (32 - uniform_bits());
  return static_cast<float>(2 * m + 1) * 0x1p-24f;
}

DEEPINFER_HD inline float exact_log(float x) {
  // x = f * 2^e with f in [0.5, 1); then fold f into [sqrt(1/2), sqrt(2)) and take t = f - 1.
  const uint32_t bits = bit_cast<uint32_t>(x);
  int32_t e = static_cast<int32_t>(bits >> 23) - 126;
  const float f = bit_cast<float>((bits & 0x007fffffU) | 0x3f000000U);
  float t;
  if (f < sqrt_half()) {
    e -= 1;
    t = (f + f) - 1.0f;
  } else {
    t = f - 1.0f;
  }
  const float z = t * t;
  float y = log_poly(0) * t;
  for (int i = 1; i < 9; ++i) {
    y = y + log_poly(i);
    y = y * t;
  }
  y = y * z;
  const float fe = static_cast<float>(e);
  y = y + ln2_lo() * fe;
  y = y + -0.5f * z;
  float r = t + y;
  r = r + ln2_hi() * fe;
  return r;
}

DEEPINFER_HD inline float gumbel_noise(uint64_t key, uint32_t token) {
  const float u = uniform_from_bits(noise_bits(key, token));
  const float e = -exact_log(u);  // Exp(1) sample, in [6e-8, 16.7]
  return -exact_log(e);
}

}  // namespace deepinfer::engine::noise_math
