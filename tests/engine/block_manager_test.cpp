#include "engine/block_manager.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "engine/check.h"

namespace deepinfer::engine {
namespace {

TEST(BlockManagerTest, RejectsBadOptions) {
  EXPECT_THROW(BlockManager(BlockManager::Options{.block_size = 0, .num_blocks = 8}), std::invalid_argument);
  EXPECT_THROW(BlockManager(BlockManager::Options{.block_size = 16, .num_blocks = 1}), std::invalid_argument);
}

TEST(BlockManagerTest, BlocksForTokensRoundsUp) {
  BlockManager manager(BlockManager::Options{.block_size = 128, .num_blocks = 4});
  EXPECT_EQ(manager.blocks_for_tokens(0), 0);
  EXPECT_EQ(manager.blocks_for_tokens(1), 1);
  EXPECT_EQ(manager.blocks_for_tokens(128), 1);
  EXPECT_EQ(manager.blocks_for_tokens(129), 2);
  EXPECT_THROW(manager.blocks_for_tokens(-1), InternalError);
}

TEST(BlockManagerTest, NeverHandsOutBlockZero) {
  BlockManager manager(BlockManager::Options{.block_size = 4, .num_blocks = 5});
  EXPECT_EQ(manager.num_usable_blocks(), 4);
  EXPECT_EQ(manager.num_free_blocks(), 4);
  std::vector<int32_t> blocks = manager.allocate(4);
  EXPECT_EQ(blocks, (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_FALSE(manager.can_allocate(1));
  EXPECT_THROW(manager.allocate(1), std::logic_error);
  EXPECT_THROW(manager.free(std::vector<int32_t>{0}), InternalError);
  manager.check_consistency();
}

TEST(BlockManagerTest, FreeReturnsBlocksAndTracksPeak) {
  BlockManager manager(BlockManager::Options{.block_size = 4, .num_blocks = 9});
  std::vector<int32_t> a = manager.allocate(3);
  std::vector<int32_t> b = manager.allocate(2);
  EXPECT_EQ(manager.num_used_blocks(), 5);
  manager.free(a);
  EXPECT_EQ(manager.num_used_blocks(), 2);
  EXPECT_EQ(manager.ref_count(a[0]), 0);
  EXPECT_EQ(manager.ref_count(b[0]), 1);
  BlockSnapshot snapshot = manager.snapshot();
  EXPECT_EQ(snapshot.num_blocks, 9);
  EXPECT_EQ(snapshot.num_usable, 8);
  EXPECT_EQ(snapshot.num_free, 6);
  EXPECT_EQ(snapshot.num_used, 2);
  EXPECT_EQ(snapshot.peak_used, 5);
  manager.check_consistency();
  // Freed blocks are reused.
  std::vector<int32_t> c = manager.allocate(6);
  EXPECT_EQ(manager.num_free_blocks(), 0);
  for (int32_t id : a) EXPECT_NE(std::find(c.begin(), c.end(), id), c.end()) << id;
}

TEST(BlockManagerTest, DoubleFreeAndOutOfRangeThrow) {
  BlockManager manager(BlockManager::Options{.block_size = 4, .num_blocks = 4});
  std::vector<int32_t> a = manager.allocate(1);
  manager.free(a);
  EXPECT_THROW(manager.free(a), std::logic_error);
  EXPECT_THROW(manager.free(std::vector<int32_t>{4}), InternalError);
  EXPECT_THROW(manager.free(std::vector<int32_t>{-1}), InternalError);
  EXPECT_THROW(manager.add_ref(a[0]), std::logic_error);
  manager.check_consistency();
}

TEST(BlockManagerTest, ReferenceCountsKeepSharedBlocksAlive) {
  BlockManager manager(BlockManager::Options{.block_size = 4, .num_blocks = 4});
  std::vector<int32_t> a = manager.allocate(1);
  manager.add_ref(a[0]);
  EXPECT_EQ(manager.ref_count(a[0]), 2);
  manager.free(a);
  EXPECT_EQ(manager.ref_count(a[0]), 1);
  EXPECT_EQ(manager.num_free_blocks(), 2);
  manager.free(a);
  EXPECT_EQ(manager.num_free_blocks(), 3);
  manager.check_consistency();
}

}  // namespace
}  // namespace deepinfer::engine
