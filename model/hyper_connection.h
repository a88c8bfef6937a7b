#pragma once
// Manifold-constrained hyper-connections (mHC, deepseek-v4.md §2.2): the residual is n = hc_mult
// streams [T, n, D]. Each sub-block site computes (pre, post, comb) from the streams, feeds the
// sub-block the pre-weighted collapse, and mixes its output back with post and the
// Sinkhorn-normalized comb. The final head collapse uses hc_head_*.
// Owns: these formulas (float32 mixing). Does not own: the sub-blocks.

#include <ATen/ATen.h>

#include "model/arithmetic.h"
#include "model/forward_hooks.h"
#include "model/model_config.h"

namespace deepinfer::model {

struct HcMix {
  at::Tensor pre;   // [T, n] float32
  at::Tensor post;  // [T, n] float32
  at::Tensor comb;  // [T, n, n] float32; comb[j][k] weights stream j into new stream k
};

// streams [T, n, D]; fn [(2+n) n, n D], base [(2+n) n], scale [3] float32. The projection and
// the Sinkhorn normalization go through `arith` (Arithmetic::hc_projection, ::sinkhorn).
HcMix hc_mix(const at::Tensor& streams, const at::Tensor& fn, const at::Tensor& base, const at::Tensor& scale, const ModelConfig& config,
             const Arithmetic& arith);

// A sub-block site's start: the mix, and the sub-block's input (the collapse by mix.pre, then
// `arith.rms_norm` with norm_weight). Where `arith.mixes_in_place(streams)` holds, after the
// projection's matmul one kernel does the rest (model/cuda/hyper_connection.h); else hc_mix,
// hc_collapse and the norm, with kNorm marked on `hooks` between them.
struct HcSite {
  HcMix mix;
  at::Tensor input;  // [T, D] in streams' dtype
};
HcSite hc_site(const at::Tensor& streams, const at::Tensor& fn, const at::Tensor& base, const at::Tensor& scale,
               const at::Tensor& norm_weight, const ModelConfig& config, const Arithmetic& arith, const ForwardHooks* hooks, int64_t layer);

// sum_j pre[j] streams[j] -> [T, D] in streams' dtype.
at::Tensor hc_collapse(const at::Tensor& streams, const at::Tensor& pre);

// new[k] = post[k] y + sum_j comb[j][k] streams[j] -> [T, n, D] in streams' dtype. y [T, D].
// Mixes in float32 and rounds once, in ATen ops (the official Arithmetic::hc_expand runs
// model/cuda/hyper_connection.h's kernel instead where it mixes in place).
at::Tensor hc_expand(const at::Tensor& streams, const at::Tensor& y, const HcMix& mix);

// comb logits [T, n, n] float32 -> softmax over the last dim + eps, then Sinkhorn: divide by
// column sums + eps, then (iters - 1) times by row sums + eps and column sums + eps.
// sinkhorn() runs the CUDA kernel (model/cuda/kernels.h) for CUDA tensors where the build has
// it, else sinkhorn_reference() (ATen).
at::Tensor sinkhorn(const at::Tensor& logits, int64_t iters, double eps);
at::Tensor sinkhorn_reference(const at::Tensor& logits, int64_t iters, double eps);

// Final collapse with hc_head_fn [n, n D], hc_head_base [n], hc_head_scale [1] -> [T, D].
at::Tensor hc_head(const at::Tensor& streams, const at::Tensor& fn, const at::Tensor& base, const at::Tensor& scale,
                   const ModelConfig& config, const Arithmetic& arith);

}  // namespace deepinfer::model
