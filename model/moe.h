#pragma once
// The MoE FFN of one layer (deepseek-v4.md §2.7): router (hash-routed by tid2eid or top-k of
// the biased scores), routed experts with the clamped SwiGLU, shared expert. Routed experts run
// only on this rank's experts, tokens exchanged through an ExpertCommunicator
// (expert_parallel.h).
// Owns: routing and expert math. Does not own: the communicator backend or weight storage.

#include <ATen/ATen.h>

#include "model/expert_parallel.h"
#include "model/moe_grouped.h"
#include "model/ops.h"
#include "model/weights.h"

namespace deepinfer::model {

struct Routing {
  at::Tensor experts;  // [T, k] int64 expert ids
  at::Tensor weights;  // [T, k] float32, normalized and scaled by routed_scaling_factor
};

// x [T, D] (ffn-normed), token_ids [T] int64. kOfficial: router logits, scores and weights in
// float32; kTransformers: in x's dtype (weights then stored as float32).
Routing route_tokens(const ModelWeights& weights, int64_t layer, const at::Tensor& x, const at::Tensor& token_ids,
                     Numerics numerics = Numerics::kOfficial);

// Routed experts of this rank + exchange + shared expert -> [T, D] in x's dtype. With a
// workspace whose usable() holds, the routed experts take the grouped path (moe_grouped.h).
// kOfficial sums the weighted expert outputs and the shared expert in float32 and rounds once;
// kTransformers rounds each weighted output, adds them in the model dtype expert by expert (as
// transformers' eager loop does), and rounds the shared-expert add.
// observer (ops.h) sees "layers.L.ffn.routed" and "layers.L.ffn.shared".
at::Tensor moe_forward(const ModelWeights& weights, int64_t layer, const at::Tensor& x, const at::Tensor& token_ids,
                       ExpertCommunicator& comm, ExpertWorkspace* workspace = nullptr, Numerics numerics = Numerics::kOfficial,
                       const Observer* observer = nullptr);

}  // namespace deepinfer::model
