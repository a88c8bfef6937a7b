#pragma once
// Arithmetic: the points of the forward where two faithful implementations of DeepSeek-V4 round
// to the model dtype at different places or sum in a different order. In float32 every
// implementation gives the same values (up to ~1e-7); in bfloat16 each rounding point moves the
// bits, and top-k choices (experts, indexer picks) can follow.
//
// This class is the official arithmetic, the one the job runs (DeepSeek's inference code):
// float32 RoPE tables, mHC projection and residual update, router, MoE combine and compressor
// pooling; one rounding per RMSNorm; attention tiled over queries with its softmax in float32.
// model/reference/transformers_arithmetic.h overrides it to compute as transformers'
// DeepseekV4ForCausalLM does (for the bit-for-bit comparison with it); batch_invariant() (the job
// setting `batch_invariant`, model/batch_invariant.h) overrides it so that no row's bits depend
// on the other rows of its batch.
// The model holds one, chosen once (DeepseekV4Model::Options::arithmetic), and the layers call
// through it without asking which it is.
// Owns: nothing (stateless). Does not own: the layer wiring, caches or weights.

#include <ATen/ATen.h>

#include <cstdint>

namespace deepinfer::model {

class ExpertWorkspace;
class ModelWeights;
struct Linear;
struct AttentionLayer;
struct AttentionOptions;
struct GroupKeys;
struct GroupQueries;
struct HcMix;
struct SequenceGroup;

class Arithmetic {
 public:
  virtual ~Arithmetic() = default;
  static const Arithmetic& official();
  // The official arithmetic with every batched operation computed per row in a fixed order
  // (model/batch_invariant.h).
  static const Arithmetic& batch_invariant();

  // The forward's projections: x [..., K], w [N, K] -> x w^T [..., N] in x's dtype.
  virtual at::Tensor linear(const at::Tensor& x, const at::Tensor& w) const;
  // A projection with an FP8 weight kept as held (weights.h Linear: e4m3 codes [N, K] uint8,
  // float32 block scales): official, cuda::fp8_linear where it runs (x quantized per 128 columns
  // to e4m3, as DeepSeek's inference does, no bfloat16 copy of the weight), else x times the
  // weight dequantized for the call.
  virtual at::Tensor linear_fp8(const at::Tensor& x, const at::Tensor& codes, const at::Tensor& scale) const;
  // linear() or linear_fp8(), as `w` is held.
  at::Tensor linear(const at::Tensor& x, const Linear& w) const;
  // The attention's grouped output projection: x [T, G, K], w [G, N, K] -> [T, G N], group g's
  // columns x[:, g] w[g]^T.
  virtual at::Tensor group_linear(const at::Tensor& x, const at::Tensor& w) const;
  // The same with w [G N, K] as held: kept FP8 group by group where N is a multiple of the
  // 128-row scale blocks (else dequantized for the call).
  at::Tensor group_linear(const at::Tensor& x, const Linear& w) const;
  // w2(silu(min(x w1^T, limit)) * clamp(x w3^T, -limit, limit)) through linear() (ops.h
  // swiglu_hidden between the projections); limit 0 = no clamp.
  at::Tensor swiglu_mlp(const at::Tensor& x, const at::Tensor& w1, const at::Tensor& w2, const at::Tensor& w3, double limit) const;
  at::Tensor swiglu_mlp(const at::Tensor& x, const Linear& w1, const Linear& w2, const Linear& w3, double limit) const;

  // RMSNorm over the last dim (ops.h rms_norm): x in the model dtype, weight undefined for none.
  virtual at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) const;

  // The dtype the RoPE cos / sin tables are rounded to in a forward of `dtype` (Rope::angles).
  virtual at::ScalarType rope_table_dtype(at::ScalarType dtype) const;

  // mHC (hyper_connection.h). streams [T, n, D] -> linear(rms(flatten(streams)), fn) [T, rows]
  // float32.
  virtual at::Tensor hc_projection(const at::Tensor& streams, const at::Tensor& fn, double eps) const;
  // comb logits [T, n, n] float32 -> doubly stochastic [T, n, n] float32.
  virtual at::Tensor sinkhorn(const at::Tensor& logits, int64_t iters, double eps) const;
  // new[k] = post[k] y + sum_j comb[j][k] streams[j] -> [T, n, D] in streams' dtype.
  virtual at::Tensor hc_expand(const at::Tensor& streams, const at::Tensor& y, const HcMix& mix) const;

  // MoE (moe.h). The dtype of the router's logits and scores for hidden rows of `dtype`.
  virtual at::ScalarType router_dtype(at::ScalarType dtype) const;
  // This rank's routed experts over gathered pairs: x [N, D], experts [N, k] int64,
  // routing_weights [N, k] float32 -> [N, D] float32. workspace: the grouped CUDA path's scratch
  // (moe_grouped.h), or null.
  virtual at::Tensor routed_experts(const ModelWeights& weights, int64_t layer, const at::Tensor& x, const at::Tensor& experts,
                                    const at::Tensor& routing_weights, ExpertWorkspace* workspace) const;
  // Whether a token's k routed contributions are summed after the exchange between ranks
  // (routed_slots(), then summed in slot order on the token's rank: moe.h moe_forward) rather
  // than on each rank before it (routed_experts()), so that the order of that sum does not depend
  // on which rank owns which expert. Official: false.
  virtual bool sums_slots_after_exchange() const;
  // [N, k, D] float32: each (token, slot)'s weighted expert output, 0 where this rank does not
  // own the expert. Here: the per-expert loop (moe.h routed_slots_loop).
  virtual at::Tensor routed_slots(const ModelWeights& weights, int64_t layer, const at::Tensor& x, const at::Tensor& experts,
                                  const at::Tensor& routing_weights, ExpertWorkspace* workspace) const;
  // The dtype in which the routed sum and the shared expert are added, for hidden rows of `dtype`.
  virtual at::ScalarType moe_sum_dtype(at::ScalarType dtype) const;

  // Compressor (compressor.h): kv [B, K, w, d'] and score [B, K, w, d'] float32 -> the softmax
  // (over w) weighted sum [B, K, d'], for a forward of `dtype`.
  virtual at::Tensor pool_windows(const at::Tensor& kv, const at::Tensor& score, at::ScalarType dtype) const;

  // CSA's lightning indexer: index_q [B, lt, Ih, Id], index_w [B, lt, Ih] float32 (the raw
  // weights_proj output), index_keys [B, E, Id] -> sum_h w_h Ih^-1/2 relu(q_h . k) Id^-1/2 as
  // [B, lt, E] float32.
  virtual at::Tensor index_scores(const at::Tensor& index_q, const at::Tensor& index_w, const at::Tensor& index_keys) const;

  // Attention of one group of sequences (attention_group.h) -> [B, L, H, d] in q's dtype.
  // options.query_tile bounds the queries attended at once where the implementation tiles.
  virtual at::Tensor attend(const AttentionLayer& layer, const SequenceGroup& group, const GroupKeys& keys, const GroupQueries& queries,
                            const AttentionOptions& options) const;
  // Whether attention with queries `q` [T, H, d] over the rings `window` reads the paged state in
  // place (attention_group.h attend_paged: the CUDA kernel model/cuda/sparse_attention.h, one
  // float32 online softmax and one rounding of the output) instead of attend() over gathered
  // keys. Official: wherever the kernel runs (bfloat16 on CUDA); the CPU keeps attend().
  // In place, the CSA picks come from the indexer's scores computed in place too (the official
  // formula of index_scores(), model/cuda/index_scores.h): an arithmetic that overrides
  // index_scores() must return false here.
  virtual bool attends_in_place(const at::Tensor& q, const at::Tensor& window) const;
  // Whether the compressor (compressor.h) updates the paged state `paged` and the tails
  // (`tail_kv`) in one pass on the device (model/cuda/compressor.h: the official pool, RMSNorm
  // and float32 RoPE table, one rounding at the paged write) after its two projections. Official:
  // wherever the kernel runs (bfloat16 state on CUDA). An arithmetic that overrides
  // pool_windows(), rms_norm() or rope_table_dtype() must return false here.
  virtual bool compresses_in_place(const at::Tensor& paged, const at::Tensor& tail_kv) const;
  // Whether an mHC site's mix, collapse and the sub-block's RMSNorm run as one kernel after the
  // projection's matmul (hyper_connection.h hc_site; model/cuda/hyper_connection.h), and
  // hc_expand() as another. Official:
  // wherever the kernel runs (bfloat16 streams on CUDA). An arithmetic that overrides
  // hc_projection(), sinkhorn() or rms_norm() must return false here.
  virtual bool mixes_in_place(const at::Tensor& streams) const;
  // Whether the attention projections' RMSNorms and RoPEs (attention.h: q_norm, the q heads'
  // norm and RoPE, kv_norm and RoPE, the indexer q's RoPE, the output's de-rotation) run as one
  // kernel in place each (model/cuda/rope.h: the bits of RopeAngles::apply with the tables as
  // built, the norm within a rounding of rms_norm()) on the layer input `x`'s device and dtype.
  // Official: wherever the kernel runs (bfloat16 on CUDA). An arithmetic that overrides
  // rms_norm() must return false here.
  virtual bool ropes_in_place(const at::Tensor& x) const;

 protected:
  Arithmetic() = default;
};

}  // namespace deepinfer::model
