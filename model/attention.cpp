#include "model/attention.h"

#include "model/arithmetic.h"
#include "model/attention_group.h"
#include "model/compressor.h"
#include "model/cuda/kernels.h"

namespace deepinfer::model {
namespace {

struct Projected {
  at::Tensor q;        // [T, H, d] roped
  at::Tensor kv;       // [T, d] roped
  at::Tensor index_q;  // [T, Ih, Id] roped (CSA)
  at::Tensor index_w;  // [T, Ih] float32, the raw head weights (CSA)
};

// entries 0..E-1 of each sequence from paged [num_blocks, 128/m, d] -> [B, E, d].
at::Tensor gather_paged(const at::Tensor& paged, const SequenceGroup& group, int64_t ratio, int64_t count) {
  const int64_t per_block = kBlockTokens / ratio;
  const at::Tensor w = at::arange(count, group.start.options());
  const at::Tensor blocks = group.block_tables.index_select(1, at::div(w * ratio, kBlockTokens, "floor"));  // [B, E]
  const at::Tensor flat = blocks * per_block + at::remainder(w, per_block);
  return paged.view({-1, paged.size(-1)}).index_select(0, flat.reshape(-1)).view({group.num_seqs, count, paged.size(-1)});
}

// The projections' RMSNorms and RoPEs. fused (Arithmetic::ropes_in_place): one kernel per call,
// in place (model/cuda/rope.h: RoPE with the bits of RopeAngles::apply, the norm within a
// rounding of rms_norm); else the arithmetic's rms_norm and RopeAngles::apply.
struct NormAndRope {
  const Arithmetic& arith;
  bool fused;
  double eps;

  // t [T, (heads,) dim]: rms_norm over dim with `weight` (undefined: none) when `norm`, then
  // the last rope_dim channels rotated by `angles` (de-rotated when `inverse`) unless it is null.
  at::Tensor operator()(at::Tensor t, bool norm, const at::Tensor& weight, const RopeAngles* angles, bool inverse = false) const {
    if (fused) {
      cuda::norm_rope({.x = t,
                       .weight = weight,
                       .cos = angles != nullptr ? angles->cos_table() : at::Tensor(),
                       .sin = angles != nullptr ? angles->sin_table(inverse) : at::Tensor(),
                       .norm = norm,
                       .eps = eps},
                      t);
      return t;
    }
    if (norm) t = arith.rms_norm(t, weight, eps);
    return angles != nullptr ? angles->apply(t, inverse) : t;
  }
};

Projected project(const ModelWeights& weights, int64_t layer, const at::Tensor& x, const RopeAngles& angles, const NormAndRope& norm_rope,
                  const ForwardHooks* hooks) {
  const ModelConfig& c = weights.config();
  const int64_t T = x.size(0);
  const Arithmetic& arith = norm_rope.arith;
  Projected out;
  const at::Tensor qr =
      norm_rope(arith.linear(x, weights.linear(layer, "attn.wq_a")), /*norm=*/true, weights.layer(layer, "attn.q_norm.weight"), nullptr);
  const at::Tensor q_proj = arith.linear(qr, weights.linear(layer, "attn.wq_b"));
  out.q = norm_rope(q_proj.view({T, c.num_heads, c.head_dim}), /*norm=*/true, at::Tensor(), &angles);
  const at::Tensor kv_proj = arith.linear(x, weights.linear(layer, "attn.wkv"));
  const at::Tensor& kv_norm = weights.layer(layer, "attn.kv_norm.weight");
  if (observing(hooks)) {  // never fused: q_proj and the normed kv are the ATen path's
    const std::string prefix = layer_prefix(layer) + "attn.";
    const at::Tensor kv = norm_rope(kv_proj, /*norm=*/true, kv_norm, nullptr);
    out.kv = norm_rope(kv, /*norm=*/false, at::Tensor(), &angles);
    hooks->observe(prefix + "q_residual", qr);
    hooks->observe(prefix + "q_proj", q_proj);
    hooks->observe(prefix + "kv_normed", kv);
  } else {
    out.kv = norm_rope(kv_proj, /*norm=*/true, kv_norm, &angles);
  }
  if (c.layer_type(layer) == LayerType::kCsa) {
    const at::Tensor iq = arith.linear(qr, weights.linear(layer, "attn.indexer.wq_b")).view({T, c.index_n_heads, c.index_head_dim});
    out.index_q = norm_rope(iq, /*norm=*/false, at::Tensor(), &angles);
    out.index_w = arith.linear(x, weights.layer(layer, "attn.indexer.weights_proj.weight")).to(at::kFloat);
  }
  return out;
}

// The group's attention read in place from the paged state (model/cuda/kernels.h
// sparse_attention). CSA with more entries than the indexer picks: the picks per query tile
// (scores by cuda::index_scores and the top k by cuda::index_topk where the kernels run, the
// picks then as rows of the paged entries, the block table applied; else Arithmetic::index_scores
// over gathered keys and at::topk, entry ids), -1 where the pick is not visible;
// with no more entries than it picks, every visible entry is picked, as for HCA (no scoring).
void attend_paged(const Arithmetic& arith, const AttentionLayer& info, const SequenceGroup& group, const Projected& proj,
                  const LayerCache& cache, const GroupQueries& queries, int64_t E, const AttentionOptions& options, at::Tensor& out) {
  const int64_t B = group.num_seqs, L = group.len;
  cuda::PagedAttention in{.q = proj.q.contiguous(),
                          .kv = proj.kv.contiguous(),
                          .window = cache.window,
                          .entries = cache.compressed,
                          .query_rows = group.rows,
                          .start = group.start,
                          .slots = group.slots,
                          .block_tables = group.block_tables.contiguous(),
                          .picks = {},
                          .sink = info.sink,
                          .len = L,
                          .ratio = info.ratio,
                          .max_entries = E,
                          .head_split = options.head_split,
                          .picks_are_rows = false,
                          .early_inputs = options.early_inputs && proj.q.is_contiguous()};
  if (info.csa && E > info.topk) {
    const bool in_place = cuda::index_scores_supported(queries.index_q, cache.index_keys);
    GroupKeys keys;
    if (!in_place) keys.index_keys = gather_paged(cache.index_keys, group, info.ratio, E).to(proj.q.scalar_type());
    std::vector<at::Tensor> picks;
    enter(options.hooks, ForwardPart::kIndexer, info.index);
    for (int64_t l0 = 0; l0 < L; l0 += options.query_tile) {
      const int64_t lt = std::min(options.query_tile, L - l0);
      const at::Tensor index_q = queries.index_q.narrow(1, l0, lt).contiguous(), index_w = queries.index_w.narrow(1, l0, lt).contiguous();
      if (in_place) {
        picks.push_back(cuda::index_topk(cuda::index_scores({.q = index_q,
                                                             .weights = index_w,
                                                             .keys = cache.index_keys,
                                                             .start = group.start,
                                                             .block_tables = in.block_tables,
                                                             .first = l0,
                                                             .entries = E,
                                                             .ratio = info.ratio}),
                                         info.topk, in.block_tables, info.ratio));
      } else {
        const at::Tensor pos = group.positions.narrow(1, l0, lt);
        const at::Tensor visible = at::arange(E, pos.options()) < at::div(pos + 1, info.ratio, "floor").unsqueeze(-1);  // [B, lt, E]
        const auto [picked, real] = index_topk(arith, info, keys, index_q, index_w, visible);
        picks.push_back(at::where(real, picked, at::full({}, -1, picked.options())));
      }
    }
    enter(options.hooks, ForwardPart::kAttnCore, info.index);
    in.picks = (picks.size() == 1 ? picks[0] : at::cat(picks, 1)).reshape({B * L, -1}).contiguous();
    in.picks_are_rows = in_place;
  }
  cuda::sparse_attention(in, out);
}

}  // namespace

at::Tensor attention_forward(const ModelWeights& weights, int64_t layer, const at::Tensor& x, const ForwardBatch& batch,
                             const std::vector<SequenceGroup>& groups, LayerCache& cache, const Rope& rope, const RopeAngles& angles,
                             const Arithmetic& arith, const AttentionOptions& options) {
  const ModelConfig& c = weights.config();
  const int64_t T = x.size(0), H = c.num_heads, d = c.head_dim, W = c.sliding_window;
  const ForwardHooks* hooks = options.hooks;
  const AttentionLayer info{layer,
                            c.compress_ratio(layer),
                            W,
                            c.index_topk,
                            H,
                            d,
                            c.index_head_dim,
                            c.layer_type(layer) == LayerType::kCsa,
                            weights.layer(layer, "attn.attn_sink")};
  enter(hooks, ForwardPart::kAttnProjection, layer);
  const NormAndRope norm_rope{arith, arith.ropes_in_place(x) && !observing(hooks), c.rms_norm_eps};
  const Projected proj = project(weights, layer, x, angles, norm_rope, hooks);
  const std::string prefix = layer_prefix(layer) + "attn.";
  at::Tensor out = at::empty({T, H, d}, x.options());
  for (const SequenceGroup& group : groups) {
    const int64_t B = group.num_seqs, L = group.len;
    if (info.ratio > 0) {
      enter(hooks, ForwardPart::kCompressor, layer);
      const at::Tensor xg = x.index_select(0, group.rows).view({B, L, -1});
      compress_group(weights, {prefix + "compressor.", info.ratio, c.compress_overlap(layer), d}, group, xg, rope, cache.tail,
                     cache.compressed, arith, hooks);
      if (info.csa) {
        compress_group(weights, {prefix + "indexer.compressor.", info.ratio, 2, c.index_head_dim}, group, xg, rope, cache.index_tail,
                       cache.index_keys, arith, hooks);
      }
    }
    enter(hooks, ForwardPart::kAttnCore, layer);
    const int64_t E = info.ratio > 0 ? group.max_end / info.ratio : 0;
    GroupQueries queries;
    if (info.csa) {
      queries.index_q = proj.index_q.index_select(0, group.rows).view({B, L, c.index_n_heads, c.index_head_dim});
      queries.index_w = proj.index_w.index_select(0, group.rows).view({B, L, c.index_n_heads});
    }
    if (arith.attends_in_place(proj.q, cache.window)) {
      attend_paged(arith, info, group, proj, cache, queries, E, options, out);
    } else {
      GroupKeys keys;
      keys.window_pool =
          at::cat({cache.window.index_select(0, group.slots).to(x.scalar_type()), proj.kv.index_select(0, group.rows).view({B, L, d})}, 1);
      if (E > 0) {
        keys.entries = gather_paged(cache.compressed, group, info.ratio, E).to(x.scalar_type());
        if (info.csa) keys.index_keys = gather_paged(cache.index_keys, group, info.ratio, E).to(x.scalar_type());
      }
      queries.q = proj.q.index_select(0, group.rows).view({B, L, H, d});
      out.index_copy_(0, group.rows, arith.attend(info, group, keys, queries, options).reshape({B * L, H, d}));
    }
    // Ring update, after the attention read the ring as it was: the run's last min(L, W) rows,
    // position t at row t % W.
    const int64_t kept = std::min(L, W);
    const at::Tensor kept_pos = group.positions.narrow(1, L - kept, kept);
    const at::Tensor kv = proj.kv.index_select(0, group.rows.view({B, L}).narrow(1, L - kept, kept).reshape(-1)).view({B, kept, d});
    cache.window.index_put_({group.slots.unsqueeze(1).expand({B, kept}), at::remainder(kept_pos, W)}, kv.to(cache.window.scalar_type()));
  }
  // De-rotate by the query position, then the grouped low-rank output projection.
  enter(hooks, ForwardPart::kAttnProjection, layer);
  const at::Tensor o = norm_rope(out, /*norm=*/false, at::Tensor(), &angles, /*inverse=*/true);
  const int64_t G = c.o_groups, group_in = H * d / G;
  const at::Tensor z = arith.group_linear(o.reshape({T, G, group_in}), weights.linear(layer, "attn.wo_a"));  // [T, G o_lora_rank]
  if (observing(hooks)) {
    hooks->observe(prefix + "o", o.reshape({T, G, group_in}));
    hooks->observe(prefix + "z", z);
  }
  return arith.linear(z, weights.linear(layer, "attn.wo_b"));
}

}  // namespace deepinfer::model
