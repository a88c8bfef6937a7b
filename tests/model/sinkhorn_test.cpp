// mHC's comb normalization: the ATen reference gives (nearly) doubly stochastic matrices (the
// CUDA kernel's test is in model_cuda_test.cpp).
#include <gtest/gtest.h>

#include "model/hyper_connection.h"

namespace deepinfer::model {
namespace {

TEST(Sinkhorn, ReferenceIsNearlyDoublyStochastic) {
  at::Generator gen = at::detail::createCPUGenerator(2);
  const at::Tensor logits = at::randn({50, 4, 4}, gen) * 3;
  const at::Tensor comb = sinkhorn_reference(logits, /*iters=*/20, /*eps=*/1e-6);
  EXPECT_LE((comb.sum(-2) - 1).abs().max().item<double>(), 1e-5);  // columns: the last step
  EXPECT_LE((comb.sum(-1) - 1).abs().max().item<double>(), 0.05);  // rows: after 20 iterations (0.03 here)
  EXPECT_TRUE((comb > 0).all().item<bool>());
  // One iteration is softmax + eps, then columns only.
  const at::Tensor one = sinkhorn_reference(logits, 1, 1e-6);
  const at::Tensor soft = at::softmax(logits, -1) + 1e-6;
  EXPECT_TRUE(at::allclose(one, soft / (soft.sum(-2, true) + 1e-6)));
  EXPECT_TRUE(at::equal(sinkhorn(logits, 20, 1e-6), comb));  // CPU tensors take the reference
}

}  // namespace
}  // namespace deepinfer::model
