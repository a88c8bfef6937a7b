// StepStaging (model/step_staging.h) on the CPU: every tensor comes back with its values, dtype
// and shape, each a view of one buffer at a 16-byte boundary in the order given; the same shapes
// land at the same addresses on the next step; a larger step moves the buffer (a new generation).
// ForwardBatch::on_host lays out the groups the forward makes from its staged index.
#include "model/step_staging.h"

#include <gtest/gtest.h>

#include "model/forward_batch.h"
#include "model/sequence_group.h"

namespace deepinfer::model {
namespace {

std::vector<int64_t> values(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

std::vector<at::Tensor> step_tensors(int64_t n, int64_t salt) {
  return {at::arange(n, at::kLong) + salt, (at::arange(3 * n, at::kInt) - salt).view({n, 3}), at::arange(n, at::kFloat).ge(n / 2),
          at::full({n}, 0.5f + static_cast<float>(salt)), at::empty({0}, at::kLong)};
}

TEST(StepStaging, TensorsKeepTheirValuesInOneBufferAtStableOffsets) {
  StepStaging staging(at::kCPU);
  std::vector<const void*> first_addresses;
  for (int64_t salt : {0, 7}) {
    const std::vector<at::Tensor> expected = step_tensors(5, salt);
    std::vector<at::Tensor> staged = expected;
    std::vector<at::Tensor*> pointers;
    for (at::Tensor& t : staged) pointers.push_back(&t);
    staging.upload(pointers);
    const auto* base = static_cast<const unsigned char*>(staging.device_base());
    std::vector<const void*> addresses;
    for (std::size_t i = 0; i < staged.size(); ++i) {
      EXPECT_EQ(staged[i].scalar_type(), expected[i].scalar_type());
      EXPECT_EQ(staged[i].sizes(), expected[i].sizes());
      EXPECT_TRUE(at::equal(staged[i], expected[i])) << "tensor " << i;
      const auto offset = static_cast<const unsigned char*>(staged[i].data_ptr()) - base;
      EXPECT_EQ(offset % 16, 0) << "tensor " << i;
      addresses.push_back(staged[i].data_ptr());
    }
    EXPECT_LT(addresses[0], addresses[1]);
    if (salt == 0) {
      first_addresses = addresses;
    } else {
      EXPECT_EQ(addresses, first_addresses) << "the same shapes must land at the same addresses";
    }
  }
  const int64_t generation = staging.generation();
  std::vector<at::Tensor> big = step_tensors(4096, 1);
  std::vector<at::Tensor*> pointers;
  for (at::Tensor& t : big) pointers.push_back(&t);
  staging.upload(pointers);
  EXPECT_GT(staging.generation(), generation);
  EXPECT_TRUE(at::equal(big[0], at::arange(4096, at::kLong) + 1));
}

TEST(StepStaging, ForwardBatchGroupsComeFromItsStagedIndex) {
  BatchInput input;
  input.tokens = {{5}, {6, 7, 8}, {9}, {10, 11}};
  input.start_positions = {40, 0, 7, 128};
  input.block_tables = {{1}, {2}, {3}, {4, 5}};
  input.state_slots = {1, 2, 3, 4};
  input.sample_rows = {0, 3, 4, 6};
  ForwardBatch batch = ForwardBatch::on_host(input);
  StepStaging staging(at::kCPU);
  staging.upload(batch.device_inputs());
  const std::vector<SequenceGroup> groups = make_groups(batch);
  ASSERT_EQ(groups.size(), 3u);  // the two prefill runs alone, then the decode runs together
  EXPECT_EQ(values(groups[0].rows), std::vector<int64_t>({1, 2, 3}));
  EXPECT_EQ(values(groups[1].rows), std::vector<int64_t>({5, 6}));
  EXPECT_EQ(values(groups[2].rows), std::vector<int64_t>({0, 4}));
  EXPECT_EQ(values(groups[2].start), std::vector<int64_t>({40, 7}));
  EXPECT_EQ(values(groups[2].slots), std::vector<int64_t>({1, 3}));
  EXPECT_EQ(values(groups[1].block_tables), std::vector<int64_t>({4, 5}));
  EXPECT_EQ(groups[2].max_end, 41);
  input.static_shapes = true;
  ForwardBatch fixed = ForwardBatch::build(input, at::kCPU);
  EXPECT_EQ(make_groups(fixed)[2].max_end, 2 * 128) << "static shapes: the tables' capacity";
}

}  // namespace
}  // namespace deepinfer::model
