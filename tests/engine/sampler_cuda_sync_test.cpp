// sample() never synchronizes with the host on CUDA: with PyTorch's sync debug mode set to
// error, any synchronizing op inside it (.item(), a device-to-host copy, nonzero, ...) throws.
// Built only with DEEPINFER_CUDA (it needs the CUDA headers); label cuda.

#include <ATen/ATen.h>
#include <c10/cuda/CUDAFunctions.h>
#include <gtest/gtest.h>

#include <vector>

#include "engine/sampler.h"
#include "engine/sampling_batch.h"
#include "tests/engine/sampler_test_util.h"

namespace deepinfer::engine {
namespace {

// Restores the previous mode on every exit path.
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

TEST(SamplerCudaSync, SampleQueuesWorkWithoutWaitingForTheDevice) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: the no-sync property is unverified";
  constexpr int64_t kVocab = 129280;
  const at::Device cuda(at::kCUDA, 0);
  std::vector<SamplingRow> rows = sampler_testing::varied_rows(64, kVocab);
  rows[1].logprobs = 20;
  const SamplingBatch batch = SamplingBatch::from_rows(rows, kVocab).to(cuda);
  const at::Tensor logits = sampler_testing::random_logits(64, kVocab, 21).to(cuda);
  SampleResult out;
  {
    const SyncDebugError guard;
    EXPECT_NO_THROW(out = sample(logits, batch));
  }
  c10::cuda::device_synchronize();
  EXPECT_EQ(out.tokens.size(0), 64);
  EXPECT_EQ(out.top_ids.size(1), 20);
}

}  // namespace
}  // namespace deepinfer::engine
