#include "engine/sampler_noise.h"

#include <bit>
#include <cmath>

namespace deepinfer::engine {
namespace {

uint64_t splitmix64_finalize(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint32_t mix_lane(uint32_t iv, uint64_t seed, uint64_t position) {
  uint32_t x = hash32(iv ^ static_cast<uint32_t>(seed));
  x = hash32(x ^ static_cast<uint32_t>(seed >> 32));
  x = hash32(x ^ static_cast<uint32_t>(position));
  return hash32(x ^ static_cast<uint32_t>(position >> 32));
}

}  // namespace

uint32_t hash32(uint32_t x) {
  x ^= x >> 16;
  x *= kHashMul1;
  x ^= x >> 15;
  x *= kHashMul2;
  x ^= x >> 16;
  return x;
}

uint64_t derive_request_seed(uint64_t job_seed, std::string_view request_id) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64 offset basis
  for (unsigned char c : request_id) {
    h ^= c;
    h *= 0x100000001b3ULL;  // FNV-1a 64 prime
  }
  return splitmix64_finalize(h ^ splitmix64_finalize(job_seed + 0x9e3779b97f4a7c15ULL));
}

uint64_t mix_seed(uint64_t sequence_seed, uint64_t output_position) {
  const uint64_t lo = mix_lane(kMixIvLo, sequence_seed, output_position);
  const uint64_t hi = mix_lane(kMixIvHi, sequence_seed, output_position);
  return (hi << 32) | lo;
}

uint32_t noise_bits(uint64_t key, uint32_t token) {
  const uint32_t x = hash32(token ^ static_cast<uint32_t>(key));
  return hash32(x ^ static_cast<uint32_t>(key >> 32));
}

float uniform_from_bits(uint32_t bits) {
  const uint32_t m = bits >> (32 - kUniformBits);
  return static_cast<float>(2 * m + 1) * 0x1p-24f;
}

float exact_log(float x) {
  // x = f * 2^e with f in [0.5, 1); then fold f into [sqrt(1/2), sqrt(2)) and take t = f - 1.
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  int32_t e = static_cast<int32_t>(bits >> 23) - 126;
  float f = std::bit_cast<float>((bits & 0x007fffffU) | 0x3f000000U);
  float t;
  if (f < kSqrtHalf) {
    e -= 1;
    t = (f + f) - 1.0f;
  } else {
    t = f - 1.0f;
  }
  const float z = t * t;
  float y = kLogPoly[0] * t;
  for (int i = 1; i < 9; ++i) {
    y = y + kLogPoly[i];
    y = y * t;
  }
  y = y * z;
  const float fe = static_cast<float>(e);
  y = y + kLn2Lo * fe;
  y = y + -0.5f * z;
  float r = t + y;
  r = r + kLn2Hi * fe;
  return r;
}

float exact_exp(float x) {
  // e^x = e^g * 2^n, n = floor(x * log2(e) + 0.5), g = x - n ln2 (two-part ln2: exact first step).
  float t = x * kLog2e;
  t = t + 0.5f;
  const float k = std::floor(t);
  float g = x - k * kLn2Hi;
  g = g - k * kLn2Lo;
  const float z = g * g;
  float p = kExpPoly[0] * g;
  for (int i = 1; i < 6; ++i) {
    p = p + kExpPoly[i];
    if (i < 5) p = p * g;
  }
  p = p * z;
  p = p + g;
  p = p + 1.0f;
  const int32_t ki = static_cast<int32_t>(k);
  const float scale = std::bit_cast<float>(static_cast<uint32_t>(ki + 127) << 23);
  return p * scale;
}

float gumbel_noise(uint64_t key, uint32_t token) {
  const float u = uniform_from_bits(noise_bits(key, token));
  const float e = -exact_log(u);  // Exp(1) sample, in [6e-8, 16.7]
  return -exact_log(e);
}

}  // namespace deepinfer::engine
