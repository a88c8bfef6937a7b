#pragma once
// The attention sub-block of one layer (deepseek-v4.md §2.4-2.6) over a flat batch: low-rank q,
// the single K=V latent, the compressors (CSA / HCA) and the lightning indexer (CSA), and one
// softmax over the sliding window plus the visible compressed entries with the per-head sink.
// Keys for a query at position t: raw KV of positions t-W+1..t (from the sequence's window ring
// for positions before the run, from the run itself after), plus compressed entries w with
// w < (t+1)/m from the paged cache (HCA: all of them; CSA: the indexer's top-k).
// Owns: the attention math and the window ring update. Does not own: mHC or the MoE.

#include <ATen/ATen.h>

#include <vector>

#include "model/arithmetic.h"
#include "model/attention_group.h"
#include "model/forward_batch.h"
#include "model/model_cache.h"
#include "model/ops.h"
#include "model/sequence_group.h"
#include "model/weights.h"

namespace deepinfer::model {

// x [T, D] attn-normed hidden rows -> [T, D]. rope is the layer's (main or compress; the compressor
// ropes its entries with it), angles the same rope's table at batch.positions (Rope::angles);
// arith: where the forward rounds (arithmetic.h); it attends each group (attention_group.h).
at::Tensor attention_forward(const ModelWeights& weights, int64_t layer, const at::Tensor& x, const ForwardBatch& batch,
                             const std::vector<SequenceGroup>& groups, LayerCache& cache, const Rope& rope, const RopeAngles& angles,
                             const Arithmetic& arith, const AttentionOptions& options);

}  // namespace deepinfer::model
