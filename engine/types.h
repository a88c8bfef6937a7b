#pragma once
// Small vocabulary types shared by the engine core (scheduler, sequences, metrics, the
// model runner's input): sequence handles, step kinds and finish reasons.

#include <cstdint>
#include <string_view>

namespace deepinfer::engine {

// Stable handle of a sequence inside one Scheduler: dense, increasing in arrival order,
// never reused. The request id string is a label carried alongside.
using SeqId = int64_t;

// Block 0 and state slot 0 are reserved for padding rows (CUDA graphs): never handed out.
inline constexpr int32_t kPaddingBlock = 0;
inline constexpr int32_t kPaddingSlot = 0;
inline constexpr int32_t kNoSlot = -1;

// A decode query token that the CPU does not know yet: the token this sequence sampled in
// the previous step, which the executor substitutes on the device (zero-overhead step).
inline constexpr int32_t kPendingToken = -1;

// A step is prefill or decode, never both; idle steps carry no sequences.
enum class StepKind { kIdle, kPrefill, kDecode };

enum class FinishReason {
  kNone,    // not finished
  kStop,    // EOS or a stop token (or a stop string reported through Scheduler::terminate)
  kLength,  // max_tokens or the model/pool length limit
  kAbort,   // cancelled
  kError,   // bad request (invalid params, prompt too long, ...): see the message
};

std::string_view step_kind_name(StepKind kind);            // "idle", "prefill", "decode"
std::string_view finish_reason_name(FinishReason reason);  // "", "stop", "length", "abort", "error"

}  // namespace deepinfer::engine
