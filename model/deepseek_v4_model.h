#pragma once
// DeepseekV4Model: the whole forward over a ForwardBatch (deepseek-v4.md §2.8):
// embed -> n residual streams -> per layer [mHC site: attention] [mHC site: MoE] -> hc_head
// collapse -> norm -> head, logits only for batch.sample_rows.
// The same code runs prefill chunks and decode steps, float32 or bfloat16, CPU or CUDA;
// it reads no device value on the host except the MoE loop's per-expert token counts (the
// grouped FP4 path on CUDA, moe_grouped.h, reads none).
// Owns: the layer wiring and the two ropes. Does not own: weights, cache, scheduling,
// sampling, or the communicator backend. No QAT simulation (as transformers' reference).

#include <ATen/ATen.h>

#include "model/arithmetic.h"
#include "model/attention.h"
#include "model/expert_parallel.h"
#include "model/forward_batch.h"
#include "model/forward_hooks.h"
#include "model/model_cache.h"
#include "model/moe_grouped.h"
#include "model/ops.h"
#include "model/weights.h"

namespace deepinfer::model {

class DeepseekV4Model final {
 public:
  struct Options {
    AttentionOptions attention;
    // Where the forward rounds and in what order it sums (arithmetic.h): the official one unless
    // a reference comparison picks another. Must outlive the model.
    const Arithmetic* arithmetic = &Arithmetic::official();
    // Sees the forward's intermediate tensors (forward_hooks.h), per layer L: "layers.L.attn_norm_out",
    // the attention's (attention.h), "layers.L.attn_out", "layers.L.attn_streams",
    // "layers.L.ffn_norm_out", the MoE's (moe.h), "layers.L.ffn_out", "layers.L.streams"; then
    // "hidden" (after hc_head and norm). For comparing with a reference; unset in production.
    Observer observer;
    // Told where each part of the forward starts (forward_hooks.h), for a step breakdown; null in
    // production. Must outlive the model.
    PartClock* clock = nullptr;
  };
  // `weights` and `comm` must outlive the model.
  DeepseekV4Model(const ModelWeights& weights, ExpertCommunicator& comm, Options options);

  // -> [S, vocab] float32 logits of batch.sample_rows. Writes the batch's sequences' state
  // (window rings, compressor tails, compressed entries) into `cache`.
  at::Tensor forward(const ForwardBatch& batch, ModelCache& cache) const;

  // Final hidden rows [S, D] (after hc_head and norm) instead of logits; for tests and MTP.
  at::Tensor forward_hidden(const ForwardBatch& batch, ModelCache& cache) const;

  // forward(), and also the final hidden rows [P, D] of batch.score_rows, computed apart from the
  // sampled rows so that asking for them changes no sampled row's bits. head() makes their logits.
  struct Scored {
    at::Tensor logits;        // [S, vocab] float32, as forward()
    at::Tensor score_hidden;  // [P, D]
  };
  Scored forward_scored(const ForwardBatch& batch, ModelCache& cache) const;
  // hidden [R, D] -> [R, vocab] float32 logits.
  at::Tensor head(const at::Tensor& hidden) const;

  const ModelConfig& config() const { return weights_.config(); }

 private:
  at::Tensor run_layers(const ForwardBatch& batch, ModelCache& cache) const;         // -> streams [T, n, D]
  at::Tensor final_hidden(const at::Tensor& streams, const at::Tensor& rows) const;  // hc_head + norm of `rows`

  const ModelWeights& weights_;
  ExpertCommunicator& comm_;
  Options options_;
  Rope main_rope_;
  Rope compress_rope_;
  // Device tables and dequantization buffers of the grouped MoE path; scratch, so forward()
  // stays const (one model is not run from two threads at once).
  mutable ExpertWorkspace experts_workspace_;
};

}  // namespace deepinfer::model
