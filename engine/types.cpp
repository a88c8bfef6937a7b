#include "engine/types.h"

namespace deepinfer::engine {

std::string_view step_kind_name(StepKind kind) {
  switch (kind) {
    case StepKind::kIdle: return "idle";
    case StepKind::kPrefill: return "prefill";
    case StepKind::kDecode: return "decode";
  }
  return "?";
}

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kError: return "error";
  }
  return "?";
}

}  // namespace deepinfer::engine
