#pragma once
// For CUDA tests only (needs the CUDA headers): PyTorch's sync debug mode set to error for a
// scope, so any synchronizing call (.item(), a blocking copy, nonzero, a stream synchronize)
// throws; the previous mode comes back on every exit path.

#include <c10/cuda/CUDAFunctions.h>

namespace deepinfer::testing {

class SyncDebugError final {
 public:
  SyncDebugError() : previous_(c10::cuda::warning_state().get_sync_debug_mode()) {
    c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_ERROR);
  }
  ~SyncDebugError() { c10::cuda::warning_state().set_sync_debug_mode(previous_); }
  SyncDebugError(const SyncDebugError&) = delete;
  SyncDebugError& operator=(const SyncDebugError&) = delete;

 private:
  c10::cuda::SyncDebugMode previous_;
};

}  // namespace deepinfer::testing
