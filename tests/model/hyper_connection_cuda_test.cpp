// The mHC kernels (model/cuda/hyper_connection.h) on the GPU (label cuda; skips with a message
// without one): a site's start (hc_site: mix, collapse, the sub-block's RMSNorm) and its end
// (hc_expand) with the kernels against the official arithmetic's ATen ops, over token counts
// 1..300 and the tiny and real widths; and batch invariance: a token's results are the same bits
// alone and inside batches of 2..256 other tokens.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <vector>

#include "model/arithmetic.h"
#include "model/cuda/kernels.h"
#include "model/hyper_connection.h"
#include "model/model_config.h"

namespace deepinfer::model::testing {
namespace {

// The official arithmetic with mHC on the ATen path.
class AtenMix final : public Arithmetic {
 public:
  bool mixes_in_place(const at::Tensor&) const override { return false; }
};

struct SiteWeights {
  at::Tensor fn, base, scale, norm;
};
SiteWeights site_weights(int64_t n, int64_t D, at::Device device) {
  const auto f32 = at::TensorOptions(device).dtype(at::kFloat);
  return {at::randn({(2 + n) * n, n * D}, f32) * 0.02, at::randn({(2 + n) * n}, f32) * 0.5, at::rand({3}, f32) + 0.5,
          (at::rand({D}, f32) + 0.5).to(at::kBFloat16)};
}

// The official hc_expand in ATen ops (what the kernel replaces).
at::Tensor aten_expand(const at::Tensor& streams, const at::Tensor& y, const HcMix& mix) { return model::hc_expand(streams, y, mix); }

// max |a - b| / max |b|
double relative(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>() / std::max(b.to(at::kDouble).abs().max().item<double>(), 1e-30);
}

TEST(HyperConnectionCuda, MatchesTheAtenOps) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: the kernels run only on CUDA";
  const at::Device cuda(at::kCUDA, 0);
  const ModelConfig config = tiny_fast_test_config();
  const AtenMix aten;
  at::manual_seed(3);
  for (int64_t D : {256, 4096}) {
    for (int64_t T : {1, 7, 300}) {
      const int64_t n = config.hc_mult;
      const SiteWeights w = site_weights(n, D, cuda);
      const at::Tensor streams = at::randn({T, n, D}, at::TensorOptions(cuda).dtype(at::kBFloat16));
      ASSERT_TRUE(Arithmetic::official().mixes_in_place(streams));
      const HcSite kernel = hc_site(streams, w.fn, w.base, w.scale, w.norm, config, Arithmetic::official(), nullptr, 0);
      const HcSite ref = hc_site(streams, w.fn, w.base, w.scale, w.norm, config, aten, nullptr, 0);
      const double input = relative(kernel.input, ref.input), post = relative(kernel.mix.post, ref.mix.post),
                   comb = relative(kernel.mix.comb, ref.mix.comb);
      const at::Tensor y = at::randn({T, D}, streams.options());
      const double expand = relative(Arithmetic::official().hc_expand(streams, y, kernel.mix), aten_expand(streams, y, kernel.mix));
      std::printf("[hc] D %5ld, %3ld tokens: max rel diff input %.3g, post %.3g, comb %.3g, expand %.3g\n", static_cast<long>(D),
                  static_cast<long>(T), input, post, comb, expand);
      EXPECT_LT(input, 2e-2);  // bfloat16 output: a rounding flip near a tie moves one value by an ulp (2^-8)
      EXPECT_LT(post, 1e-5);
      EXPECT_LT(comb, 1e-4);
      EXPECT_LT(expand, 2e-2);
    }
  }
}

TEST(HyperConnectionCuda, BatchInvariant) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: the kernels run only on CUDA";
  const at::Device cuda(at::kCUDA, 0);
  const ModelConfig config = tiny_fast_test_config();
  const int64_t n = config.hc_mult, D = 4096;
  at::manual_seed(4);
  const SiteWeights w = site_weights(n, D, cuda);
  const at::Tensor target = at::randn({1, n, D}, at::TensorOptions(cuda).dtype(at::kBFloat16));
  const at::Tensor target_raw = at::randn({1, (2 + n) * n}, at::TensorOptions(cuda).dtype(at::kFloat));
  const at::Tensor target_y = at::randn({1, D}, target.options());
  const auto pre = [&](const at::Tensor& streams, const at::Tensor& raw) {
    return cuda::hc_pre({.streams = streams,
                         .raw = raw,
                         .scale = w.scale,
                         .base = w.base,
                         .norm_weight = w.norm,
                         .iters = config.hc_sinkhorn_iters,
                         .rms_eps = config.rms_norm_eps,
                         .hc_eps = config.hc_eps});
  };
  const cuda::HcPreOut alone = pre(target, target_raw);
  const at::Tensor alone_expand = cuda::hc_post(target, target_y, alone.post, alone.comb);
  std::mt19937_64 rng(9);
  for (int64_t b : {2, 17, 64, 256}) {
    at::Tensor streams = at::randn({b, n, D}, target.options()), raw = at::randn({b, (2 + n) * n}, target_raw.options()),
               y = at::randn({b, D}, target.options());
    const int64_t at = static_cast<int64_t>(rng() % static_cast<uint64_t>(b));
    streams[at].copy_(target[0]);
    raw[at].copy_(target_raw[0]);
    y[at].copy_(target_y[0]);
    const cuda::HcPreOut batched = pre(streams, raw);
    EXPECT_TRUE(at::equal(batched.input[at], alone.input[0]) && at::equal(batched.post[at], alone.post[0]) &&
                at::equal(batched.comb[at], alone.comb[0]))
        << "hc_pre: the token at " << at << " of " << b << " differs";
    EXPECT_TRUE(at::equal(cuda::hc_post(streams, y, batched.post, batched.comb)[at], alone_expand[0]))
        << "hc_post: the token at " << at << " of " << b << " differs";
  }
}

}  // namespace
}  // namespace deepinfer::model::testing
