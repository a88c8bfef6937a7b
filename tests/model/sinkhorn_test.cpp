// mHC's comb normalization: the ATen reference gives (nearly) doubly stochastic matrices, and
// the CUDA kernel (model/cuda/sinkhorn.cu) matches the reference on CUDA tensors.
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

TEST(SinkhornCuda, KernelMatchesReference) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: the kernel runs only on CUDA";
  at::Generator gen = at::detail::createCPUGenerator(3);
  for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{4}, int64_t{8}}) {
    for (int64_t tokens : {int64_t{0}, int64_t{1}, int64_t{333}}) {
      const at::Tensor logits = (at::randn({tokens, n, n}, gen) * 4).cuda();
      const at::Tensor kernel = sinkhorn(logits, 20, 1e-6).cpu();
      const at::Tensor reference = sinkhorn_reference(logits, 20, 1e-6).cpu();
      ASSERT_EQ(kernel.sizes(), reference.sizes());
      if (tokens == 0) continue;
      const double diff = (kernel - reference).abs().max().item<double>();
      std::cout << "[sinkhorn_cuda] n " << n << ", " << tokens << " tokens: max |kernel - reference| " << diff << std::endl;
      EXPECT_LE(diff, 2e-6) << "n " << n;
    }
  }
}

}  // namespace
}  // namespace deepinfer::model
