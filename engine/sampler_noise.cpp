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

uint32_t hash32(uint32_t x) { return noise_math::hash32(x); }

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

uint32_t noise_bits(uint64_t key, uint32_t token) { return noise_math::noise_bits(key, token); }

float uniform_from_bits(uint32_t bits) { return noise_math::uniform_from_bits(bits); }

float exact_log(float x) { return noise_math::exact_log(x); }

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

float gumbel_noise(uint64_t key, uint32_t token) { return noise_math::gumbel_noise(key, token); }

}  // namespace deepinfer::engine
