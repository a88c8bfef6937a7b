#include "model/forward_hooks.h"

namespace deepinfer::model {

const char* forward_part_name(ForwardPart part) {
  switch (part) {
    case ForwardPart::kStaging: return "staging";
    case ForwardPart::kEmbed: return "embedding";
    case ForwardPart::kMhc: return "mHC";
    case ForwardPart::kNorm: return "norms";
    case ForwardPart::kAttnProjection: return "attention projections";
    case ForwardPart::kCompressor: return "compressor";
    case ForwardPart::kIndexer: return "indexer";
    case ForwardPart::kAttnCore: return "attention core";
    case ForwardPart::kRouter: return "MoE routing";
    case ForwardPart::kExchange: return "expert exchange";
    case ForwardPart::kRoutedExperts: return "routed experts";
    case ForwardPart::kSharedExpert: return "shared expert";
    case ForwardPart::kHead: return "head";
    case ForwardPart::kSampler: return "sampler";
    case ForwardPart::kCount: break;
  }
  return "?";
}

}  // namespace deepinfer::model
