#include "model/attention_group.h"

#include <cmath>
#include <limits>
#include <vector>

#include "model/arithmetic.h"

namespace deepinfer::model {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Attention of queries [B, lt, H, d] at positions pos [B, lt] (a tile of the group) -> [B, lt, H, d].
at::Tensor attend_tile(const Arithmetic& arith, const AttentionLayer& info, const SequenceGroup& group, const GroupKeys& keys,
                       const at::Tensor& q, const at::Tensor& pos, const at::Tensor& index_q, const at::Tensor& index_w,
                       const ForwardHooks* hooks) {
  const int64_t B = q.size(0), lt = q.size(1), H = info.heads, d = info.head_dim, W = info.window;
  const auto i64 = pos.options();
  // Window keys: positions t-W+1..t.
  const at::Tensor key_pos = pos.unsqueeze(-1) - (W - 1) + at::arange(W, i64);  // [B, lt, W]
  const at::Tensor window_keys =
      gather_rows(keys.window_pool, window_pool_rows(key_pos, group.start.view({B, 1, 1}), W, group.len));  // [B, lt, W, d]
  std::vector<at::Tensor> scores{at::matmul(q, window_keys.transpose(-1, -2))};                             // [B, lt, H, W]
  std::vector<at::Tensor> valid{key_pos >= 0};
  at::Tensor compressed_keys;  // [B, lt, k, d] for CSA; HCA uses keys.entries directly
  if (keys.entries.defined()) {
    const int64_t E = keys.entries.size(1);
    const at::Tensor visible = at::arange(E, i64) < at::div(pos + 1, info.ratio, "floor").unsqueeze(-1);  // [B, lt, E]
    if (!info.csa) {
      scores.push_back(at::matmul(q.reshape({B, lt * H, d}), keys.entries.transpose(1, 2)).view({B, lt, H, E}));
      valid.push_back(visible);
    } else {
      enter(hooks, ForwardPart::kIndexer, info.index);
      auto [picked, real] = index_topk(arith, info, keys, index_q, index_w, visible);
      enter(hooks, ForwardPart::kAttnCore, info.index);
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

// Queries l0..l0+lt-1 of a [B, L, ...] tensor, contiguous (undefined stays undefined).
at::Tensor tile_of(const at::Tensor& t, int64_t l0, int64_t lt) { return t.defined() ? t.narrow(1, l0, lt).contiguous() : t; }

}  // namespace

at::Tensor gather_rows(const at::Tensor& pool, const at::Tensor& index) {
  const int64_t B = pool.size(0), N = pool.size(1), d = pool.size(2);
  std::vector<int64_t> shape(index.sizes().begin(), index.sizes().end());
  shape.push_back(d);
  std::vector<int64_t> offset_shape(index.dim(), 1);
  offset_shape[0] = B;
  const at::Tensor flat = index + at::arange(B, index.options()).view(offset_shape) * N;
  return pool.reshape({B * N, d}).index_select(0, flat.reshape(-1)).view(shape);
}

at::Tensor window_pool_rows(const at::Tensor& key_pos, const at::Tensor& start, int64_t window, int64_t len) {
  return at::where(key_pos < start, at::remainder(key_pos, window), window + key_pos - start).clamp(0, window + len - 1);
}

std::pair<at::Tensor, at::Tensor> index_topk(const Arithmetic& arith, const AttentionLayer& layer, const GroupKeys& keys,
                                             const at::Tensor& index_q, const at::Tensor& index_w, const at::Tensor& visible) {
  return top_entries(arith.index_scores(index_q, index_w, keys.index_keys).masked_fill(~visible, kNegInf), layer.topk);  // [B, lt, E]
}

std::pair<at::Tensor, at::Tensor> top_entries(const at::Tensor& scores, int64_t k) {
  auto [top, picked] = scores.topk(std::min(k, scores.size(-1)), /*dim=*/-1);  // [B, lt, k]
  return {picked, top != kNegInf};
}

at::Tensor attend_tiled(const Arithmetic& arith, const AttentionLayer& layer, const SequenceGroup& group, const GroupKeys& keys,
                        const GroupQueries& queries, const AttentionOptions& options) {
  const int64_t L = group.len, query_tile = options.query_tile;
  std::vector<at::Tensor> tiles;
  for (int64_t l0 = 0; l0 < L; l0 += query_tile) {
    const int64_t lt = std::min(query_tile, L - l0);
    tiles.push_back(attend_tile(arith, layer, group, keys, tile_of(queries.q, l0, lt), group.positions.narrow(1, l0, lt),
                                tile_of(queries.index_q, l0, lt), tile_of(queries.index_w, l0, lt), options.hooks));
  }
  return tiles.size() == 1 ? tiles[0] : at::cat(tiles, 1);
}

}  // namespace deepinfer::model
