// sample() never synchronizes with the host on CUDA: with PyTorch's sync debug mode set to
// error, any synchronizing op inside it (.item(), a device-to-host copy, nonzero, ...) throws.
// Built only with DEEPINFER_CUDA (it needs the CUDA headers); label cuda.

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "engine/sampler.h"
#include "engine/sampling_batch.h"
#include "tests/engine/sampler_test_util.h"
#include "tests/testing/sync_debug_error.h"

namespace deepinfer::engine {
namespace {

using deepinfer::testing::SyncDebugError;

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
