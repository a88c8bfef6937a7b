#include "model/hyper_connection.h"

#include "model/cuda/kernels.h"

namespace deepinfer::model {

HcMix hc_mix(const at::Tensor& streams, const at::Tensor& fn, const at::Tensor& base, const at::Tensor& scale, const ModelConfig& config,
             const Arithmetic& arith) {
  const int64_t n = config.hc_mult;
  const int64_t T = streams.size(0);
  const double eps = config.hc_eps;
  const at::Tensor mix = arith.hc_projection(streams, fn, config.rms_norm_eps);  // [T, (2+n) n]
  HcMix out;
  out.pre = at::sigmoid(mix.narrow(1, 0, n) * scale[0] + base.narrow(0, 0, n)) + eps;
  out.post = 2.0 * at::sigmoid(mix.narrow(1, n, n) * scale[1] + base.narrow(0, n, n));
  const at::Tensor comb = mix.narrow(1, 2 * n, n * n).reshape({T, n, n}) * scale[2] + base.narrow(0, 2 * n, n * n).reshape({n, n});
  out.comb = arith.sinkhorn(comb, config.hc_sinkhorn_iters, eps);
  return out;
}

HcSite hc_site(const at::Tensor& streams, const at::Tensor& fn, const at::Tensor& base, const at::Tensor& scale,
               const at::Tensor& norm_weight, const ModelConfig& config, const Arithmetic& arith, const ForwardHooks* hooks,
               int64_t layer) {
  if (arith.mixes_in_place(streams)) {
    const at::Tensor raw = arith.linear(streams.flatten(1).to(at::kFloat), fn);  // [T, (2+n) n], scaled by 1/rms in the kernel
    cuda::HcPreOut out = cuda::hc_pre({.streams = streams,
                                       .raw = raw,
                                       .scale = scale,
                                       .base = base,
                                       .norm_weight = norm_weight,
                                       .iters = config.hc_sinkhorn_iters,
                                       .rms_eps = config.rms_norm_eps,
                                       .hc_eps = config.hc_eps});
    return {{.pre = {}, .post = out.post, .comb = out.comb}, out.input};
  }
  HcSite site;
  site.mix = hc_mix(streams, fn, base, scale, config, arith);
  const at::Tensor collapsed = hc_collapse(streams, site.mix.pre);
  enter(hooks, ForwardPart::kNorm, layer);
  site.input = arith.rms_norm(collapsed, norm_weight, config.rms_norm_eps);
  return site;
}

at::Tensor sinkhorn_reference(const at::Tensor& logits, int64_t iters, double eps) {
  at::Tensor comb = at::softmax(logits, -1) + eps;
  comb = comb / (comb.sum(-2, /*keepdim=*/true) + eps);
  for (int64_t i = 1; i < iters; ++i) {
    comb = comb / (comb.sum(-1, /*keepdim=*/true) + eps);
    comb = comb / (comb.sum(-2, /*keepdim=*/true) + eps);
  }
  return comb;
}

at::Tensor sinkhorn(const at::Tensor& logits, int64_t iters, double eps) {
  if (cuda::sinkhorn_supported(logits, iters)) return cuda::sinkhorn(logits, iters, eps);
  return sinkhorn_reference(logits, iters, eps);
}

at::Tensor hc_collapse(const at::Tensor& streams, const at::Tensor& pre) {
  return (pre.unsqueeze(-1) * streams.to(at::kFloat)).sum(1).to(streams.scalar_type());
}

at::Tensor hc_expand(const at::Tensor& streams, const at::Tensor& y, const HcMix& mix) {
  // [T, n, n]^T x [T, n, D]: new[t, k] = sum_j comb[t, j, k] streams[t, j]
  const at::Tensor mixed = at::bmm(mix.comb.transpose(1, 2), streams.to(at::kFloat));
  return (mix.post.unsqueeze(-1) * y.to(at::kFloat).unsqueeze(1) + mixed).to(streams.scalar_type());
}

at::Tensor hc_head(const at::Tensor& streams, const at::Tensor& fn, const at::Tensor& base, const at::Tensor& scale,
                   const ModelConfig& config, const Arithmetic& arith) {
  const at::Tensor mix = arith.hc_projection(streams, fn, config.rms_norm_eps);  // [T, n]
  const at::Tensor pre = at::sigmoid(mix * scale[0] + base) + config.hc_eps;
  return hc_collapse(streams, pre);
}

}  // namespace deepinfer::model
