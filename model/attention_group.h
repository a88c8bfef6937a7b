#pragma once
// One group's attention (attention.h runs it per SequenceGroup): what a query row attends over
// and the official, tiled computation of it. A query at position t sees raw KV of positions
// t-W+1..t (the ring as it was before the run, then the run's own rows) and the compressed
// entries w < (t+1)/m (HCA: all of them; CSA: the indexer's top-k), plus the per-head sink in
// the softmax denominator; V = K.
// Owns: these inputs and the tiled official math. Does not own: projections, compressors or the
// ring update (attention.cpp), nor where the forward rounds (arithmetic.h).

#include <ATen/ATen.h>

#include <cstdint>
#include <utility>

#include "model/forward_hooks.h"
#include "model/sequence_group.h"

namespace deepinfer::model {

class Arithmetic;

// The shape of one layer's attention.
struct AttentionLayer {
  int64_t index = 0;      // the layer's index in the model
  int64_t ratio = 0;      // compression ratio m (0: sliding window only)
  int64_t window = 0;     // W
  int64_t topk = 0;       // CSA: compressed entries picked per query
  int64_t heads = 0;      // H
  int64_t head_dim = 0;   // d
  int64_t index_dim = 0;  // CSA indexer head dim
  bool csa = false;
  at::Tensor sink;  // [H] float32
};

struct AttentionOptions {
  int64_t query_tile = 256;  // queries per gathered-key tile (bounds the [tile, W + k, d] gathers)
  // In-place attention: the Hopper head-split kernel where it applies (cuda::PagedAttention::
  // head_split: CSA and window-only layers). A kernel under test: off unless a caller sets it.
  bool head_split = false;
  // In-place attention: q loaded before the Hopper split kernel waits for the launch before it
  // (cuda::PagedAttention::early_inputs), where the step's q needs no copy (it is then written by
  // the projections' norm + RoPE, launches before the compressor, the indexer and the group's key
  // copies). Off: no gain measured in the forward, whose launch before the attention is a plain one
  // (forward_bench --early-inputs 0|1; docs/kernel-notes.md, thirtieth session).
  bool early_inputs = false;
  // Observer (".q_residual", ".q_proj", ".kv_normed", compressor ".entries", ".o", ".z" under
  // "layers.L.attn.") and part clock (forward_hooks.h); DeepseekV4Model sets them from its Options.
  const ForwardHooks* hooks = nullptr;
};

// Key sources of one group, shared by its queries.
struct GroupKeys {
  at::Tensor window_pool;  // [B, W + L, d]: the ring as it was before the run, then the run's rows
  at::Tensor entries;      // [B, E, d] compressed entries 0..E-1 (ratio > 0 and E > 0), else undefined
  at::Tensor index_keys;   // [B, E, Id] (CSA)
};

// The group's queries, roped.
struct GroupQueries {
  at::Tensor q;        // [B, L, H, d]
  at::Tensor index_q;  // [B, L, Ih, Id] (CSA)
  at::Tensor index_w;  // [B, L, Ih] float32, the raw indexer head weights (CSA)
};

// Rows of `pool` [B, N, d] at per-sequence indices [B, ...] -> [B, ..., d].
at::Tensor gather_rows(const at::Tensor& pool, const at::Tensor& index);

// The ring row (< W) or run row (W + i) of key positions `key_pos` [B, ...] for runs starting
// at `start` (broadcastable to key_pos): positions before the run come from the ring (row k % W).
at::Tensor window_pool_rows(const at::Tensor& key_pos, const at::Tensor& start, int64_t window, int64_t len);

// The top min(k, E) of scores [B, lt, E] (-inf where not visible) -> (picks [B, lt, k] int64,
// real [B, lt, k]: a visible entry), by at::topk.
std::pair<at::Tensor, at::Tensor> top_entries(const at::Tensor& scores, int64_t k);

// CSA's pick: the indexer's scores (arith.index_scores) masked to `visible` [B, lt, E], then
// at::topk -> (picks [B, lt, k] int64, real [B, lt, k]: a visible entry).
std::pair<at::Tensor, at::Tensor> index_topk(const Arithmetic& arith, const AttentionLayer& layer, const GroupKeys& keys,
                                             const at::Tensor& index_q, const at::Tensor& index_w, const at::Tensor& visible);

// The official attention of a group (Arithmetic::attend): queries in tiles of query_tile, each
// tile's window keys gathered [B, lt, W, d], scores in the model dtype, softmax with the sink in
// float32, P rounded to the model dtype, P.V per key source -> [B, L, H, d].
// The clock sees kIndexer and kAttnCore of `layer_index` per tile.
at::Tensor attend_tiled(const Arithmetic& arith, const AttentionLayer& layer, const SequenceGroup& group, const GroupKeys& keys,
                        const GroupQueries& queries, const AttentionOptions& options);

}  // namespace deepinfer::model
