#pragma once
// What a forward reports while it runs, for reference comparisons and benchmarks; nothing in
// production sets either hook, and then the forward builds no names and records no times.
//  - Observer: named intermediate tensors ("layers.3.attn_out", ...), to compare a run with a
//    reference layer by layer (tests/reference/compare_taps.py).
//  - PartClock: where each part of a forward starts (a part lasts until the next one starts),
//    for the step breakdown (bench --breakdown, forward_bench; engine/part_timer.h).
// Owns: the names of the parts. Does not own: what is done with the tensors or the times.

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <string>

namespace deepinfer::model {

using Observer = std::function<void(const std::string& name, const at::Tensor& value)>;

// The parts of a decode or prefill step a breakdown reports. The model marks kEmbed .. kHead;
// the runner marks kStaging (building the batch on the device) and kSampler.
enum class ForwardPart {
  kStaging,         // the step's batch built and copied to the device
  kEmbed,           // token embedding into the residual streams
  kMhc,             // hyper-connection mix, collapse and expand (and hc_head); with the mHC kernel (CUDA) the norm below too
  kNorm,            // the RMSNorm before each sub-block (ATen path) and the final one
  kAttnProjection,  // q / kv (and indexer q) projections with their norms and RoPE; wo_a, wo_b
  kCompressor,      // CSA / HCA compressors (the indexer's too): tails, entries, paged writes
  kIndexer,         // CSA's lightning indexer: scores and top-k
  kAttnCore,        // key gathering, the window ring update, scores, softmax, P.V
  kRouter,          // MoE routing
  kExchange,        // expert-parallel all-gather and reduce-scatter (communication)
  kRoutedExperts,   // the routed experts this rank owns
  kSharedExpert,    // the shared expert and the MoE sum
  kHead,            // the vocabulary projection of the sampled rows
  kSampler,         // sampling
  kCount
};
const char* forward_part_name(ForwardPart part);

class PartClock {
 public:
  virtual ~PartClock() = default;
  // `part` of `layer` (-1 outside the layers) starts now, on the forward's device stream.
  virtual void enter(ForwardPart part, int64_t layer) = 0;
  // The step's last part ends now (the runner, after its sampling is enqueued); `decode`: the
  // step was a decode step (a clock may keep only those).
  virtual void end_step(bool decode) {}
};

struct ForwardHooks {
  const Observer* observer = nullptr;
  PartClock* clock = nullptr;

  bool observing() const { return observer != nullptr && *observer; }
  void observe(const std::string& name, const at::Tensor& value) const {
    if (observing()) (*observer)(name, value);
  }
  void enter(ForwardPart part, int64_t layer) const {
    if (clock != nullptr) clock->enter(part, layer);
  }
};

// The hooks of a call that may have none.
inline bool observing(const ForwardHooks* hooks) { return hooks != nullptr && hooks->observing(); }
inline void enter(const ForwardHooks* hooks, ForwardPart part, int64_t layer) {
  if (hooks != nullptr) hooks->enter(part, layer);
}

}  // namespace deepinfer::model
