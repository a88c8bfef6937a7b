#pragma once
// The MoE FFN of one layer (deepseek-v4.md §2.7): router (hash-routed by tid2eid or top-k of
// the biased scores), routed experts with the clamped SwiGLU, shared expert. Routed experts run
// only on this rank's experts, tokens exchanged through an ExpertCommunicator
// (expert_parallel.h).
// Owns: routing and expert math. Does not own: the communicator backend or weight storage.

#include <ATen/ATen.h>

#include <functional>

#include "model/arithmetic.h"
#include "model/expert_parallel.h"
#include "model/forward_hooks.h"
#include "model/moe_grouped.h"
#include "model/ops.h"
#include "model/weights.h"

namespace deepinfer::model {

struct Routing {
  at::Tensor experts;  // [T, k] int64 expert ids
  at::Tensor weights;  // [T, k] float32, normalized and scaled by routed_scaling_factor
};

// x [T, D] (ffn-normed), token_ids [T] int64. Logits and scores in arith.router_dtype(x's dtype)
// (the official arithmetic: float32); weights returned as float32.
Routing route_tokens(const ModelWeights& weights, int64_t layer, const at::Tensor& x, const at::Tensor& token_ids, const Arithmetic& arith);

// Calls visit(e, tokens, pairs) for every expert e this rank owns that got pairs, in ascending
// order of e: pairs [n] int64 flat (token * k + slot) indices into experts [N, k], in ascending
// order, tokens [n] their token rows. One host read (the per-expert counts).
using ExpertVisitor = std::function<void(int64_t expert, const at::Tensor& tokens, const at::Tensor& pairs)>;
void for_each_owned_expert(const ModelWeights& weights, const at::Tensor& experts, const ExpertVisitor& visit);

// The per-expert loop over this rank's experts (the CPU path and the grouped path's reference):
// x [N, D], experts [N, k], routing_weights [N, k] float32 -> [N, D] float32, each expert's
// weighted output added in float32, experts in ascending order; the experts' MLPs through `arith`.
at::Tensor routed_experts_loop(const Arithmetic& arith, const ModelWeights& weights, int64_t layer, const at::Tensor& x,
                               const at::Tensor& experts, const at::Tensor& routing_weights);

// The same loop, each (token, slot)'s weighted output kept apart: [N, k, D] float32, 0 where
// this rank does not own the expert (Arithmetic::routed_slots).
at::Tensor routed_slots_loop(const Arithmetic& arith, const ModelWeights& weights, int64_t layer, const at::Tensor& x,
                             const at::Tensor& experts, const at::Tensor& routing_weights);

// Routed experts of this rank (Arithmetic::routed_experts; with a workspace whose usable() holds,
// the official arithmetic takes the grouped path, moe_grouped.h) + exchange + shared expert ->
// [T, D] in x's dtype. The routed sum and the shared expert are added in
// arith.moe_sum_dtype(x's dtype) (official: float32, rounded once).
// The observer (hooks) sees "layers.L.ffn.routed" and "layers.L.ffn.shared"; the clock the router,
// the exchange, the routed and the shared experts.
at::Tensor moe_forward(const ModelWeights& weights, int64_t layer, const at::Tensor& x, const at::Tensor& token_ids,
                       ExpertCommunicator& comm, const Arithmetic& arith, ExpertWorkspace* workspace = nullptr,
                       const ForwardHooks* hooks = nullptr);

}  // namespace deepinfer::model
