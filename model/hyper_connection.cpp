#include "model/hyper_connection.h"

#if DEEPINFER_CUDA_KERNELS
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "model/cuda/sinkhorn.h"
#endif

namespace deepinfer::model {
namespace {

// linear(rms(flatten(streams)), fn) in float32: [T, rows]. kOfficial scales the projection,
// kTransformers its input.
at::Tensor normalized_projection(const at::Tensor& streams, const at::Tensor& fn, double eps, Numerics numerics) {
  const at::Tensor flat = streams.flatten(1).to(at::kFloat);  // [T, n D]
  const at::Tensor inv_rms = at::rsqrt(flat.pow(2).mean(-1, /*keepdim=*/true) + eps);
  if (numerics == Numerics::kTransformers) return at::linear(flat * inv_rms, fn);
  return at::linear(flat, fn) * inv_rms;
}

}  // namespace

HcMix hc_mix(const at::Tensor& streams, const at::Tensor& fn, const at::Tensor& base, const at::Tensor& scale, const ModelConfig& config,
             Numerics numerics) {
  const int64_t n = config.hc_mult;
  const int64_t T = streams.size(0);
  const double eps = config.hc_eps;
  const at::Tensor mix = normalized_projection(streams, fn, config.rms_norm_eps, numerics);  // [T, (2+n) n]
  HcMix out;
  out.pre = at::sigmoid(mix.narrow(1, 0, n) * scale[0] + base.narrow(0, 0, n)) + eps;
  out.post = 2.0 * at::sigmoid(mix.narrow(1, n, n) * scale[1] + base.narrow(0, n, n));
  const at::Tensor comb = mix.narrow(1, 2 * n, n * n).reshape({T, n, n}) * scale[2] + base.narrow(0, 2 * n, n * n).reshape({n, n});
  // kTransformers: transformers' ATen op sequence (the CUDA kernel rounds in its own order).
  out.comb = numerics == Numerics::kTransformers ? sinkhorn_reference(comb, config.hc_sinkhorn_iters, eps)
                                                 : sinkhorn(comb, config.hc_sinkhorn_iters, eps);
  return out;
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
#if DEEPINFER_CUDA_KERNELS
  const int64_t n = logits.size(-1);
  if (logits.is_cuda() && logits.scalar_type() == at::kFloat && (n == 1 || n == 2 || n == 4 || n == 8) && iters >= 1) {
    const at::Tensor in = logits.contiguous();
    at::Tensor out = at::empty_like(in);
    const c10::cuda::CUDAGuard guard(in.device());
    cuda::sinkhorn(in.data_ptr<float>(), out.data_ptr<float>(), in.numel() / (n * n), static_cast<int>(n), static_cast<int>(iters),
                   static_cast<float>(eps), c10::cuda::getCurrentCUDAStream().stream());
    return out;
  }
#endif
  return sinkhorn_reference(logits, iters, eps);
}

at::Tensor hc_collapse(const at::Tensor& streams, const at::Tensor& pre) {
  return (pre.unsqueeze(-1) * streams.to(at::kFloat)).sum(1).to(streams.scalar_type());
}

at::Tensor hc_expand(const at::Tensor& streams, const at::Tensor& y, const HcMix& mix, Numerics numerics) {
  // [T, n, n]^T x [T, n, D]: new[t, k] = sum_j comb[t, j, k] streams[t, j]
  if (numerics == Numerics::kTransformers) {
    const at::ScalarType dt = streams.scalar_type();
    return mix.post.to(dt).unsqueeze(-1) * y.to(dt).unsqueeze(1) + at::bmm(mix.comb.to(dt).transpose(1, 2), streams);
  }
  const at::Tensor mixed = at::bmm(mix.comb.transpose(1, 2), streams.to(at::kFloat));
  return (mix.post.unsqueeze(-1) * y.to(at::kFloat).unsqueeze(1) + mixed).to(streams.scalar_type());
}

at::Tensor hc_head(const at::Tensor& streams, const at::Tensor& fn, const at::Tensor& base, const at::Tensor& scale, const ModelConfig& config,
                   Numerics numerics) {
  const at::Tensor mix = normalized_projection(streams, fn, config.rms_norm_eps, numerics);  // [T, n]
  const at::Tensor pre = at::sigmoid(mix * scale[0] + base) + config.hc_eps;
  return hc_collapse(streams, pre);
}

}  // namespace deepinfer::model
