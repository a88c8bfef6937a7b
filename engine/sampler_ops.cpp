#include "engine/sampler_ops.h"

#include "engine/cuda/kernels.h"
#include "engine/sampler_noise.h"

namespace deepinfer::engine {
namespace {

constexpr int64_t kMask32 = 0xffffffffLL;

// hash32 on int64 tensors holding uint32 values, in place. kHashMul2 >= 2^31 is used as its
// (negative) int32 value: x * (c - 2^32) == x * c (mod 2^32) and stays inside int64.
void hash32_(at::Tensor& x) {
  x.bitwise_xor_(at::bitwise_right_shift(x, 16));
  x.mul_(static_cast<int64_t>(static_cast<int32_t>(kHashMul1))).bitwise_and_(kMask32);
  x.bitwise_xor_(at::bitwise_right_shift(x, 15));
  x.mul_(static_cast<int64_t>(static_cast<int32_t>(kHashMul2))).bitwise_and_(kMask32);
  x.bitwise_xor_(at::bitwise_right_shift(x, 16));
}

// The low and high 32 bits of an int64 tensor, each as a value in [0, 2^32).
at::Tensor low_word(const at::Tensor& v) { return at::bitwise_and(v, kMask32); }
at::Tensor high_word(const at::Tensor& v) { return at::bitwise_and(at::bitwise_right_shift(v, 32), kMask32); }

void check_float(const at::Tensor& x, const char* what) {
  TORCH_CHECK(x.scalar_type() == at::kFloat, what, " needs a float32 tensor, got ", x.scalar_type());
}

void check_keys(const at::Tensor& keys, int64_t vocab_size) {
  TORCH_CHECK(keys.dim() == 2 && keys.size(1) == 2 && keys.scalar_type() == at::kLong, "keys must be [B, 2] int64 from mix_seed, got ",
              keys.sizes(), " ", keys.scalar_type());
  TORCH_CHECK(vocab_size > 0 && vocab_size <= (int64_t{1} << 31), "vocab_size must be in [1, 2^31], got ", vocab_size);
}

}  // namespace

at::Tensor exact_log(const at::Tensor& x) {
  check_float(x, "exact_log");
  // x = f * 2^e, f in [0.5, 1): read the exponent and mantissa fields (x > 0: sign bit clear).
  const at::Tensor bits = x.contiguous().view(at::kInt);
  at::Tensor e = at::bitwise_right_shift(bits, 23).sub_(126);
  const at::Tensor f = at::bitwise_or(at::bitwise_and(bits, 0x007fffff), 0x3f000000).view(at::kFloat);
  // Fold f into [sqrt(1/2), sqrt(2)): t = 2f - 1 and e - 1 below sqrt(1/2), else t = f - 1.
  const at::Tensor small = f.lt(kSqrtHalf);
  const at::Tensor t = at::where(small, at::add(f, f), f).sub_(1.0f);
  e.sub_(small.to(at::kInt));
  const at::Tensor z = at::mul(t, t);
  at::Tensor y = at::mul(t, kLogPoly[0]);
  for (int i = 1; i < 9; ++i) y.add_(kLogPoly[i]).mul_(t);
  y.mul_(z);
  const at::Tensor fe = e.to(at::kFloat);
  y.add_(at::mul(fe, kLn2Lo));
  y.add_(at::mul(z, -0.5f));
  at::Tensor r = at::add(t, y);
  r.add_(at::mul(fe, kLn2Hi));
  return r;
}

at::Tensor exact_exp(const at::Tensor& x) {
  check_float(x, "exact_exp");
  // e^x = e^g * 2^k with k = floor(x * log2(e) + 0.5) and g = x - k ln2 in two exact-ish steps.
  const at::Tensor k = at::mul(x, kLog2e).add_(0.5f).floor_();
  at::Tensor g = at::sub(x, at::mul(k, kLn2Hi));
  g.sub_(at::mul(k, kLn2Lo));
  const at::Tensor z = at::mul(g, g);
  at::Tensor p = at::mul(g, kExpPoly[0]);
  for (int i = 1; i < 6; ++i) {
    p.add_(kExpPoly[i]);
    if (i < 5) p.mul_(g);
  }
  p.mul_(z).add_(g).add_(1.0f);
  // 2^k built from its bit pattern: k in [-115, 0], so k + 127 is a normal exponent field.
  const at::Tensor scale = at::bitwise_left_shift(k.to(at::kInt).add_(127), 23).view(at::kFloat);
  return p.mul_(scale);
}

at::Tensor mix_seed(const at::Tensor& seed, const at::Tensor& position) {
  TORCH_CHECK(seed.dim() == 1 && seed.scalar_type() == at::kLong, "seed must be [B] int64, got ", seed.sizes(), " ", seed.scalar_type());
  TORCH_CHECK(position.sizes() == seed.sizes() && position.scalar_type() == at::kLong && position.device() == seed.device(),
              "position must be [B] int64 on the seed's device, got ", position.sizes(), " ", position.scalar_type(), " on ",
              position.device());
  // Both lanes at once: column 0 starts from kMixIvLo, column 1 from kMixIvHi.
  const at::Tensor seed_lo = low_word(seed).unsqueeze(1);  // [B, 1]
  at::Tensor x =
      at::cat({at::bitwise_xor(seed_lo, static_cast<int64_t>(kMixIvLo)), at::bitwise_xor(seed_lo, static_cast<int64_t>(kMixIvHi))},
              1);  // [B, 2]
  hash32_(x);
  x.bitwise_xor_(high_word(seed).unsqueeze(1));
  hash32_(x);
  x.bitwise_xor_(low_word(position).unsqueeze(1));
  hash32_(x);
  x.bitwise_xor_(high_word(position).unsqueeze(1));
  hash32_(x);
  return x;
}

at::Tensor noise_bits(const at::Tensor& keys, int64_t vocab_size) {
  check_keys(keys, vocab_size);
  const at::Tensor ids = at::arange(vocab_size, keys.options()).unsqueeze(0);  // [1, V]
  at::Tensor x = at::bitwise_xor(ids, keys.select(1, 0).unsqueeze(1));         // [B, V]
  hash32_(x);
  x.bitwise_xor_(keys.select(1, 1).unsqueeze(1));
  hash32_(x);
  return x;
}

at::Tensor gumbel_noise(const at::Tensor& keys, int64_t vocab_size, NoiseKernel kernel) {
  // The fused kernel (engine/cuda/kernels.h): the same bits in one launch.
  if (kernel == NoiseKernel::kFused && cuda::gumbel_noise_supported(keys)) {
    check_keys(keys, vocab_size);
    return cuda::gumbel_noise(keys, vocab_size);
  }
  at::Tensor m = at::bitwise_right_shift(noise_bits(keys, vocab_size), 32 - kUniformBits);
  // u = (2m + 1) * 2^-24: 2m + 1 < 2^24 converts to float exactly; the power-of-two scale is exact.
  const at::Tensor u = m.mul_(2).add_(1).to(at::kFloat).mul_(0x1p-24f);
  const at::Tensor e = exact_log(u).neg_();  // Exp(1), in [6e-8, 16.7]
  return exact_log(e).neg_();
}

}  // namespace deepinfer::engine
