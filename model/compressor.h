#pragma once
// The KV compressor (deepseek-v4.md §2.5) over a SequenceGroup: continues each sequence's tail
// (official layout, model_cache.h), emits the entries of every window of m tokens the group's
// tokens complete, writes them (normed, roped at position w m) into the paged cache through
// the block tables, and stores the new tail. Serves the attention compressor (d' = head_dim,
// CSA overlap 2 or HCA 1) and the CSA indexer's compressor (d' = index_head_dim, overlap 2).
// Owns: the compression math and the tail/paged writes. Does not own: the attention.

#include <ATen/ATen.h>

#include <string>

#include "model/arithmetic.h"
#include "model/forward_hooks.h"
#include "model/model_cache.h"
#include "model/ops.h"
#include "model/sequence_group.h"
#include "model/weights.h"

namespace deepinfer::model {

struct CompressorSpec {
  std::string prefix;   // e.g. "layers.2.attn.compressor." (wkv, wgate, ape, norm below it)
  int64_t ratio = 0;    // m
  int64_t overlap = 1;  // c: 2 = CSA overlap (previous window's first half joins), 1 = HCA
  int64_t dim = 0;      // d'
};

// x [B, L, D] attn-normed hidden rows of the group. paged [num_blocks, 128/m, d'].
// Windows a sequence completes are those w with p <= (w+1) m - 1 < p + L (p = first position).
// Pooling (Arithmetic::pool_windows), the entries' RMSNorm and their RoPE table round where
// `arith` says (the official arithmetic: float32 up to the paged write). The observer (hooks) sees
// spec.prefix + "entries": [B, K, d'] for the candidate windows of the run (incomplete ones zero).
void compress_group(const ModelWeights& weights, const CompressorSpec& spec, const SequenceGroup& group, const at::Tensor& x,
                    const Rope& rope, CompressorTail& tail, at::Tensor& paged, const Arithmetic& arith,
                    const ForwardHooks* hooks = nullptr);

}  // namespace deepinfer::model
