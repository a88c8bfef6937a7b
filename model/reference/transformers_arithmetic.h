#pragma once
// The arithmetic of transformers 5.x DeepseekV4ForCausalLM (deepseek-v4.md §7.3), for comparing
// our forward with it bit for bit in bfloat16 (tests/reference/run_hf_reference.sh,
// tests/reference/compare_taps.py). Used by the reference tests and harness only; the job runs
// the official arithmetic (model/arithmetic.h).
//
// It rounds to the model dtype where transformers does: RMSNorm's normalized value before the
// weight, RoPE cos / sin, the mHC post / comb weights and residual update, the router and routing
// weights, each expert's weighted output and the shared-expert add, the compressor's pooling
// weights and sum. And it computes as transformers does where the order of a sum decides the
// bits: the mHC projection normalizes its input (not its output), Sinkhorn as ATen ops, the
// routed experts as its eager loop (one gate|up matmul per expert, outputs added in the model
// dtype in ascending expert order), the indexer's q . k in float32 with its broadcast shapes and
// the scale on relu(q . k) before the head weights, and attention as its eager attention (one
// untiled score matmul and one P.V over the keys its sliding cache holds). With one sequence per
// forward, as transformers runs it, the aim is the same bfloat16 computation bit for bit. In
// float32 it is the official forward up to the mHC projection's order (~1e-7).

#include "model/arithmetic.h"

namespace deepinfer::model::reference {

class TransformersArithmetic final : public Arithmetic {
 public:
  at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) const override;
  at::ScalarType rope_table_dtype(at::ScalarType dtype) const override { return dtype; }
  at::Tensor hc_projection(const at::Tensor& streams, const at::Tensor& fn, double eps) const override;
  at::Tensor sinkhorn(const at::Tensor& logits, int64_t iters, double eps) const override;
  at::Tensor hc_expand(const at::Tensor& streams, const at::Tensor& y, const HcMix& mix) const override;
  at::ScalarType router_dtype(at::ScalarType dtype) const override { return dtype; }
  at::Tensor routed_experts(const ModelWeights& weights, int64_t layer, const at::Tensor& x, const at::Tensor& experts,
                            const at::Tensor& routing_weights, ExpertWorkspace* workspace) const override;
  at::ScalarType moe_sum_dtype(at::ScalarType dtype) const override { return dtype; }
  at::Tensor pool_windows(const at::Tensor& kv, const at::Tensor& score, at::ScalarType dtype) const override;
  at::Tensor index_scores(const at::Tensor& index_q, const at::Tensor& index_w, const at::Tensor& index_keys) const override;
  at::Tensor attend(const AttentionLayer& layer, const SequenceGroup& group, const GroupKeys& keys, const GroupQueries& queries,
                    const AttentionOptions& options) const override;
  // transformers attends over gathered keys, as attend() computes it.
  bool attends_in_place(const at::Tensor&, const at::Tensor&) const override { return false; }
  bool compresses_in_place(const at::Tensor&, const at::Tensor&) const override { return false; }
  bool mixes_in_place(const at::Tensor&) const override { return false; }
  bool ropes_in_place(const at::Tensor&) const override { return false; }
};

const Arithmetic& transformers_arithmetic();

}  // namespace deepinfer::model::reference
