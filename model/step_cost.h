#pragma once
// The roofline of a decode step (deepinfer bench): what one step of B sequences must at least
// read from device memory and compute, so a measured step time can be put against
// max(bytes / bandwidth, FLOPs / matrix rate). Counted from the weights as held (ModelWeights:
// their dtypes and shapes, so FP4 experts count 4.25 bits a weight and bf16 linears 16) and
// the config:
//  - weights touched: every non-expert tensor once (the embedding: the batch's rows only; the
//    hash router's tid2eid: the batch's rows), and per layer the routed experts this rank holds
//    that the step's tokens are expected to pick: n (1 - (1 - k/N)^T) of N for T tokens routed
//    uniformly at top-k (T = B x ranks under expert parallelism), n the experts held;
//  - state read: per sequence and layer the window ring (min(context, W) rows), HCA's compressed
//    entries (context / m), CSA's indexer keys (context / m) and its top-k entries in the cache
//    dtype, and the compressor tails (float32);
//  - FLOPs: 2 per multiply-add of every linear a token passes (the held experts it picks, the head
//    for its sampled row), the attention scores and P.V over its keys, and the indexer's scores.
// Owns: the counting. Does not own: timing (the bench) or the ceilings (options of the bench).

#include <ATen/ATen.h>

#include <cstdint>

#include "model/weights.h"

namespace deepinfer::model {

struct StepCost {
  double weight_bytes = 0;
  double state_bytes = 0;
  double flops = 0;
  double bytes() const { return weight_bytes + state_bytes; }
  // max(bytes / bandwidth, flops / matrix rate), in milliseconds.
  double floor_ms(double bytes_per_s, double flops_per_s) const;
};

class DecodeCost final {
 public:
  // `weights` as loaded on this rank; world_size ranks share the routed experts (each holds
  // weights.experts()) and each sends its batch to all of them.
  DecodeCost(const ModelWeights& weights, int world_size);

  // One decode step of `batch` sequences (per rank) whose contexts average `context` tokens.
  StepCost step(int64_t batch, double context) const;

 private:
  ModelConfig config_;
  int world_size_ = 1;
  double dense_bytes_ = 0;   // non-expert tensors read whole
  double row_bytes_ = 0;     // per token: its embedding row and tid2eid rows
  double expert_bytes_ = 0;  // one routed expert of one layer (w1, w2, w3 and scales)
  double experts_held_ = 0;  // per layer
  double dense_flops_per_token_ = 0;
  double head_flops_per_token_ = 0;
  double state_elem_bytes_ = 2;  // the cache dtype's element size
};

// The device memory a forward step's working tensors can reach at once (the memory plan's
// activation reserve), in compute dtype `dtype`, counted from the forward's shapes:
//  - residual streams [T, hc, D] float32 mixing, four live copies (in, out, mixed, expanded);
//  - attention: q [T, H, d] in three forms (projected, rotated, output), and
//      in place (the CUDA kernels): the indexer's float32 scores of one query tile and its top-k,
//      or every query's picks, whichever is larger;
//      gathered (attention_group.h): a tile's scores (its queries x H x (W + max(top-k,
//      context / m_HCA)), float32 and the softmax copy) or the indexer's tile (its queries x
//      index heads x context / m_CSA in the model dtype plus two float32 copies);
//    a tile holds 256 queries of a prefill run, or every sequence of a decode group;
//  - MoE: per (token, expert) pair the gathered row, its float32 partial and contribution [D]
//    and the gate/up/activation rows [3I];
//  - logits, Gumbel noise and scores [S, V] float32;
//  - prompt logprobs (engine/prompt_logprobs.h): one slice of kScoreSliceRows rows' logits and
//    what their log-softmax and sort keep alive, ~32 bytes per row and vocabulary entry;
// plus 25% for what else is alive and the allocator's rounding (measured, step_cost.cpp).
// An estimate from shapes, not a measurement: `deepinfer generate` and `bench` print the
// allocator's peak beside it on CUDA.
// Rows whose prompt logprobs are made at once (their logits, the log-softmax's and the sort's
// [rows, V] temporaries): engine/prompt_logprobs.h slices by it, the estimate below counts one.
inline constexpr int64_t kScoreSliceRows = 64;

struct StepShape {
  int64_t tokens = 0;        // T: scheduled tokens (max_num_batched_tokens)
  int64_t max_seqs = 0;      // sequences in a step (max_num_seqs)
  int64_t sampled_rows = 0;  // S
  int64_t max_context = 0;   // the longest context (max_model_len)
  bool in_place = false;     // attention and the indexer's scores read the paged state (model/cuda/kernels.h)
};
int64_t step_workspace_bytes(const ModelConfig& config, at::ScalarType dtype, const StepShape& step);

}  // namespace deepinfer::model
