#include "model/attention.h"

#include <cmath>
#include <limits>

#include "model/compressor.h"

namespace deepinfer::model {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Projected {
  at::Tensor q;        // [T, H, d] roped
  at::Tensor kv;       // [T, d] roped
  at::Tensor index_q;  // [T, Ih, Id] roped (CSA)
  at::Tensor index_w;  // [T, Ih] float32, scaled by Ih^-0.5 (CSA)
};

// Key sources of one group, shared by its query tiles.
struct GroupKeys {
  at::Tensor window_pool;  // [B, W + L, d]: the ring as it was before the run, then the run's rows
  at::Tensor entries;      // [B, E, d] compressed entries 0..E-1 (ratio > 0 and E > 0)
  at::Tensor index_keys;   // [B, E, Id] (CSA)
};

struct LayerInfo {
  int64_t ratio, window, topk, heads, head_dim, index_dim;
  bool csa;
  at::Tensor sink;  // [H] float32
};

// entries 0..E-1 of each sequence from paged [num_blocks, 128/m, d] -> [B, E, d].
at::Tensor gather_paged(const at::Tensor& paged, const SequenceGroup& group, int64_t ratio, int64_t count) {
  const int64_t per_block = kBlockTokens / ratio;
  const at::Tensor w = at::arange(count, group.start.options());
  const at::Tensor blocks = group.block_tables.index_select(1, at::div(w * ratio, kBlockTokens, "floor"));  // [B, E]
  const at::Tensor flat = blocks * per_block + at::remainder(w, per_block);
  return paged.view({-1, paged.size(-1)}).index_select(0, flat.reshape(-1)).view({group.num_seqs, count, paged.size(-1)});
}

// Rows of `pool` [B, N, d] at per-sequence indices [B, ...] -> [B, ..., d].
at::Tensor gather_rows(const at::Tensor& pool, const at::Tensor& index) {
  const int64_t B = pool.size(0), N = pool.size(1), d = pool.size(2);
  std::vector<int64_t> shape(index.sizes().begin(), index.sizes().end());
  shape.push_back(d);
  std::vector<int64_t> offset_shape(index.dim(), 1);
  offset_shape[0] = B;
  const at::Tensor flat = index + at::arange(B, index.options()).view(offset_shape) * N;
  return pool.reshape({B * N, d}).index_select(0, flat.reshape(-1)).view(shape);
}

// CSA's lightning indexer: sum_h w_h relu(q_h . k_w) / sqrt(Id) over the entries, top-k of the
// visible ones -> (picks [B, lt, k] int64, real [B, lt, k]: the pick is a visible entry).
// `transformers` scores as transformers' DeepseekV4IndexerScorer does: q . k in float32 with its
// broadcast shapes, the scale on relu(q . k) before the head weights (in bfloat16 a rounding
// difference here flips picks).
std::pair<at::Tensor, at::Tensor> index_topk(const LayerInfo& info, const GroupKeys& keys, const at::Tensor& index_q, const at::Tensor& index_w,
                                             const at::Tensor& visible, bool transformers = false) {
  const int64_t B = index_q.size(0), lt = index_q.size(1), Ih = index_q.size(2), E = keys.index_keys.size(1);
  at::Tensor scores;
  if (transformers) {
    scores = at::matmul(index_q.to(at::kFloat), keys.index_keys.transpose(1, 2).to(at::kFloat).unsqueeze(1));  // [B, lt, Ih, E]
    scores = (at::relu(scores) * std::pow(static_cast<double>(info.index_dim), -0.5) * index_w.unsqueeze(-1)).sum(2);
  } else {
    scores = at::matmul(index_q.reshape({B, lt * Ih, info.index_dim}), keys.index_keys.transpose(1, 2));
    scores = (at::relu(scores.to(at::kFloat)).view({B, lt, Ih, E}) * index_w.unsqueeze(-1)).sum(2);
    scores = scores / std::sqrt(static_cast<double>(info.index_dim));
  }
  scores = scores.masked_fill(~visible, kNegInf);
  auto [top, picked] = scores.topk(std::min(info.topk, E), /*dim=*/-1);  // [B, lt, k]
  return {picked, top != kNegInf};
}

// Attention of queries [B, lt, H, d] at positions pos [B, lt] (tile of a group) -> [B, lt, H, d].
at::Tensor attend_tile(const LayerInfo& info, const SequenceGroup& group, const GroupKeys& keys, const at::Tensor& q, const at::Tensor& pos,
                       const at::Tensor& index_q, const at::Tensor& index_w) {
  const int64_t B = q.size(0), lt = q.size(1), H = info.heads, d = info.head_dim, W = info.window, L = group.len;
  const auto i64 = pos.options();
  // Window keys: positions t-W+1..t; before the run's first position p from the ring (row k % W).
  const at::Tensor key_pos = pos.unsqueeze(-1) - (W - 1) + at::arange(W, i64);  // [B, lt, W]
  const at::Tensor p = group.start.view({B, 1, 1});
  const at::Tensor slot = at::where(key_pos < p, at::remainder(key_pos, W), W + key_pos - p).clamp(0, W + L - 1);
  const at::Tensor window_keys = gather_rows(keys.window_pool, slot);  // [B, lt, W, d]
  std::vector<at::Tensor> scores{at::matmul(q, window_keys.transpose(-1, -2))};  // [B, lt, H, W]
  std::vector<at::Tensor> valid{key_pos >= 0};
  at::Tensor compressed_keys;  // [B, lt, k, d] for CSA; HCA uses keys.entries directly
  if (keys.entries.defined()) {
    const int64_t E = keys.entries.size(1);
    const at::Tensor visible = at::arange(E, i64) < at::div(pos + 1, info.ratio, "floor").unsqueeze(-1);  // [B, lt, E]
    if (!info.csa) {
      scores.push_back(at::matmul(q.reshape({B, lt * H, d}), keys.entries.transpose(1, 2)).view({B, lt, H, E}));
      valid.push_back(visible);
    } else {
      auto [picked, real] = index_topk(info, keys, index_q, index_w, visible);
      compressed_keys = gather_rows(keys.entries, picked.reshape({B, -1})).view({B, lt, -1, d});
      scores.push_back(at::matmul(q, compressed_keys.transpose(-1, -2)));
      valid.push_back(real);
    }
  }
  at::Tensor logits = at::cat(scores, -1).to(at::kFloat) / std::sqrt(static_cast<double>(d));  // [B, lt, H, keys]
  logits = logits.masked_fill(~at::cat(valid, -1).unsqueeze(2), kNegInf);
  // The sink joins the softmax denominator only.
  const at::Tensor sink = info.sink.view({1, 1, H, 1}).expand({B, lt, H, 1});
  const at::Tensor probs = at::softmax(at::cat({logits, sink}, -1), -1).narrow(-1, 0, logits.size(-1)).to(q.scalar_type());
  at::Tensor out = at::matmul(probs.narrow(-1, 0, W), window_keys);  // V = K
  if (keys.entries.defined()) {
    const at::Tensor p_c = probs.narrow(-1, W, probs.size(-1) - W);
    if (!info.csa) {
      out = out + at::matmul(p_c.reshape({B, lt * H, -1}), keys.entries).view({B, lt, H, d});
    } else {
      out = out + at::matmul(p_c, compressed_keys);
    }
  }
  return out;
}

// Numerics::kTransformers: a group's attention as transformers' eager attention computes it, so a
// one-sequence group (B = 1) runs its exact matmul shapes: keys = the min(p, W-1) positions its
// sliding cache holds before the run, the run's rows, then every compressed entry (masked per
// query: causal, window, and for CSA the indexer's picks); one [B, H, L, K] score matmul in the
// model dtype, scaled in it, the sink's softmax in float32 after subtracting the row max, P
// rounded, one P.V matmul. q [B, L, H, d] roped -> [B, L, H, d]. Untiled: O(L (L + W + E)) per
// head, which is fine for the reference comparisons this mode exists for.
at::Tensor attend_group_transformers(const LayerInfo& info, const SequenceGroup& group, const GroupKeys& keys, const at::Tensor& q,
                                     const at::Tensor& index_q, const at::Tensor& index_w) {
  const int64_t B = q.size(0), L = q.size(1), H = info.heads, d = info.head_dim, W = info.window;
  const auto i64 = group.start.options();
  const int64_t prior = std::min(group.max_end - L, W - 1);
  const at::Tensor p = group.start.view({B, 1});
  const at::Tensor key_pos = p - prior + at::arange(prior + L, i64);  // [B, prior + L]
  const at::Tensor slot = at::where(key_pos < p, at::remainder(key_pos, W), W + key_pos - p).clamp(0, W + L - 1);
  at::Tensor k = gather_rows(keys.window_pool, slot);  // [B, prior + L, d]
  const at::Tensor qp = group.positions.unsqueeze(-1), kp = key_pos.unsqueeze(1);
  std::vector<at::Tensor> visible{(kp >= 0) & (kp <= qp) & (kp > qp - W)};  // [B, L, prior + L]
  if (keys.entries.defined()) {
    const int64_t E = keys.entries.size(1);
    at::Tensor seen = at::arange(E, i64) < at::div(group.positions + 1, info.ratio, "floor").unsqueeze(-1);  // [B, L, E]
    if (info.csa) {
      auto [picked, real] = index_topk(info, keys, index_q, index_w, seen, /*transformers=*/true);
      seen = at::zeros_like(seen).scatter(-1, picked, real);
    }
    k = at::cat({k, keys.entries}, 1);
    visible.push_back(seen);
  }
  const int64_t K = k.size(1);
  const at::Tensor qh = q.transpose(1, 2).contiguous();                      // [B, H, L, d]
  const at::Tensor kh = k.unsqueeze(1).expand({B, H, K, d});  // the single KV head over H heads, a stride-0 view as repeat_kv gives
  at::Tensor logits = at::matmul(qh, kh.transpose(2, 3)).mul(std::pow(static_cast<double>(d), -0.5)).to(at::kFloat);
  logits = logits.masked_fill(~at::cat(visible, -1).unsqueeze(1), kNegInf);
  at::Tensor combined = at::cat({logits, info.sink.view({1, H, 1, 1}).expand({B, H, L, 1})}, -1);
  combined = combined - std::get<0>(combined.max(-1, /*keepdim=*/true));
  const at::Tensor probs = at::softmax(combined, -1).narrow(-1, 0, K).to(q.scalar_type());
  return at::matmul(probs, kh).transpose(1, 2);
}

Projected project(const ModelWeights& weights, int64_t layer, const at::Tensor& x, const RopeAngles& angles, Numerics numerics,
                  const Observer* observer) {
  const ModelConfig& c = weights.config();
  const int64_t T = x.size(0);
  const double eps = c.rms_norm_eps;
  Projected out;
  const at::Tensor qr = rms_norm(at::linear(x, weights.layer(layer, "attn.wq_a.weight")), weights.layer(layer, "attn.q_norm.weight"), eps, numerics);
  const at::Tensor q_proj = at::linear(qr, weights.layer(layer, "attn.wq_b.weight"));
  out.q = angles.apply(rms_norm(q_proj.view({T, c.num_heads, c.head_dim}), at::Tensor(), eps, numerics));
  const at::Tensor kv = rms_norm(at::linear(x, weights.layer(layer, "attn.wkv.weight")), weights.layer(layer, "attn.kv_norm.weight"), eps, numerics);
  out.kv = angles.apply(kv);
  if (observer != nullptr) {
    const std::string prefix = layer_prefix(layer) + "attn.";
    observe(observer, prefix + "q_residual", qr);
    observe(observer, prefix + "q_proj", q_proj);
    observe(observer, prefix + "kv_normed", kv);
  }
  if (c.layer_type(layer) == LayerType::kCsa) {
    const at::Tensor iq = at::linear(qr, weights.layer(layer, "attn.indexer.wq_b.weight")).view({T, c.index_n_heads, c.index_head_dim});
    out.index_q = angles.apply(iq);
    const at::Tensor index_w = at::linear(x, weights.layer(layer, "attn.indexer.weights_proj.weight")).to(at::kFloat);
    const double heads = static_cast<double>(c.index_n_heads);
    out.index_w = numerics == Numerics::kTransformers ? index_w * std::pow(heads, -0.5) : index_w / std::sqrt(heads);
  }
  return out;
}

}  // namespace

at::Tensor attention_forward(const ModelWeights& weights, int64_t layer, const at::Tensor& x, const ForwardBatch& batch,
                             const std::vector<SequenceGroup>& groups, LayerCache& cache, const Rope& rope, const RopeAngles& angles,
                             const AttentionOptions& options, Numerics numerics) {
  const ModelConfig& c = weights.config();
  const int64_t T = x.size(0), H = c.num_heads, d = c.head_dim, W = c.sliding_window;
  const LayerInfo info{c.compress_ratio(layer), W, c.index_topk, H, d, c.index_head_dim, c.layer_type(layer) == LayerType::kCsa,
                       weights.layer(layer, "attn.attn_sink")};
  const Projected proj = project(weights, layer, x, angles, numerics, options.observer);
  const std::string prefix = layer_prefix(layer) + "attn.";
  at::Tensor out = at::empty({T, H, d}, x.options());
  for (const SequenceGroup& group : groups) {
    const int64_t B = group.num_seqs, L = group.len;
    if (info.ratio > 0) {
      const at::Tensor xg = x.index_select(0, group.rows).view({B, L, -1});
      compress_group(weights, {prefix + "compressor.", info.ratio, c.compress_overlap(layer), d}, group, xg, rope, cache.tail, cache.compressed, numerics,
                     options.observer);
      if (info.csa) {
        compress_group(weights, {prefix + "indexer.compressor.", info.ratio, 2, c.index_head_dim}, group, xg, rope, cache.index_tail, cache.index_keys,
                       numerics, options.observer);
      }
    }
    GroupKeys keys;
    const at::Tensor kv = proj.kv.index_select(0, group.rows).view({B, L, d});
    keys.window_pool = at::cat({cache.window.index_select(0, group.slots).to(x.scalar_type()), kv}, 1);
    // Ring update: the run's last min(L, W) rows, position t at row t % W.
    const int64_t kept = std::min(L, W);
    const at::Tensor kept_pos = group.positions.narrow(1, L - kept, kept);
    cache.window.index_put_({group.slots.unsqueeze(1).expand({B, kept}), at::remainder(kept_pos, W)},
                            kv.narrow(1, L - kept, kept).to(cache.window.scalar_type()));
    const int64_t E = info.ratio > 0 ? group.max_end / info.ratio : 0;
    if (E > 0) {
      keys.entries = gather_paged(cache.compressed, group, info.ratio, E).to(x.scalar_type());
      if (info.csa) keys.index_keys = gather_paged(cache.index_keys, group, info.ratio, E).to(x.scalar_type());
    }
    const at::Tensor rows = group.rows.view({B, L});
    if (numerics == Numerics::kTransformers) {
      at::Tensor index_q, index_w;
      if (info.csa) {
        index_q = proj.index_q.index_select(0, group.rows).view({B, L, c.index_n_heads, c.index_head_dim});
        index_w = proj.index_w.index_select(0, group.rows).view({B, L, c.index_n_heads});
      }
      const at::Tensor q = proj.q.index_select(0, group.rows).view({B, L, H, d});
      out.index_copy_(0, group.rows, attend_group_transformers(info, group, keys, q, index_q, index_w).reshape({B * L, H, d}));
      continue;
    }
    for (int64_t l0 = 0; l0 < L; l0 += options.query_tile) {
      const int64_t lt = std::min(options.query_tile, L - l0);
      const at::Tensor tile_rows = rows.narrow(1, l0, lt).reshape(-1);
      at::Tensor index_q, index_w;
      if (info.csa) {
        index_q = proj.index_q.index_select(0, tile_rows).view({B, lt, c.index_n_heads, c.index_head_dim});
        index_w = proj.index_w.index_select(0, tile_rows).view({B, lt, c.index_n_heads});
      }
      const at::Tensor q = proj.q.index_select(0, tile_rows).view({B, lt, H, d});
      const at::Tensor o = attend_tile(info, group, keys, q, group.positions.narrow(1, l0, lt), index_q, index_w);
      out.index_copy_(0, tile_rows, o.reshape({B * lt, H, d}));
    }
  }
  // De-rotate by the query position, then the grouped low-rank output projection.
  const at::Tensor o = angles.apply(out, /*inverse=*/true);
  const int64_t G = c.o_groups, group_in = H * d / G;
  const at::Tensor wo_a = weights.layer(layer, "attn.wo_a.weight").view({G, c.o_lora_rank, group_in});
  const at::Tensor z = at::bmm(o.reshape({T, G, group_in}).transpose(0, 1), wo_a.transpose(1, 2)).transpose(0, 1).reshape({T, G * c.o_lora_rank});
  if (options.observer != nullptr) {
    observe(options.observer, prefix + "o", o.reshape({T, G, group_in}));
    observe(options.observer, prefix + "z", z);
  }
  return at::linear(z, weights.layer(layer, "attn.wo_b.weight"));
}

}  // namespace deepinfer::model
