#include "engine/block_manager.h"

#include <algorithm>

#include "engine/check.h"
#include "engine/types.h"

namespace deepinfer::engine {

BlockManager::BlockManager(Options options) : options_(options) {
  ENGINE_CHECK(options_.block_size >= 1, "block_size must be >= 1, got ", options_.block_size);
  ENGINE_CHECK(options_.num_blocks >= 2, "num_blocks must be >= 2 (block 0 is reserved), got ", options_.num_blocks);
  ref_counts_.assign(options_.num_blocks, 0);
  free_.reserve(options_.num_blocks - 1);
  for (int32_t id = options_.num_blocks - 1; id >= 1; --id) free_.push_back(id);
}

int32_t BlockManager::blocks_for_tokens(int64_t num_tokens) const {
  ENGINE_ASSERT(num_tokens >= 0, "num_tokens must be >= 0, got ", num_tokens);
  return static_cast<int32_t>((num_tokens + options_.block_size - 1) / options_.block_size);
}

std::vector<int32_t> BlockManager::allocate(int32_t n) {
  ENGINE_ASSERT(n >= 0, "cannot allocate ", n, " blocks");
  ENGINE_ASSERT(can_allocate(n), "allocate(", n, ") with only ", num_free_blocks(), " free blocks");
  std::vector<int32_t> blocks(free_.end() - n, free_.end());
  std::reverse(blocks.begin(), blocks.end());
  free_.resize(free_.size() - n);
  for (int32_t id : blocks) {
    ENGINE_ASSERT(ref_counts_[id] == 0, "free block ", id, " has ref count ", ref_counts_[id]);
    ref_counts_[id] = 1;
  }
  peak_used_ = std::max(peak_used_, num_used_blocks());
  return blocks;
}

void BlockManager::add_ref(int32_t block) {
  check_id(block);
  ENGINE_ASSERT(ref_counts_[block] >= 1, "add_ref on free block ", block);
  ++ref_counts_[block];
}

void BlockManager::free(std::span<const int32_t> blocks) {
  for (int32_t id : blocks) {
    check_id(id);
    ENGINE_ASSERT(ref_counts_[id] >= 1, "double free of block ", id);
    if (--ref_counts_[id] == 0) free_.push_back(id);
  }
}

int32_t BlockManager::ref_count(int32_t block) const {
  check_id(block);
  return ref_counts_[block];
}

BlockSnapshot BlockManager::snapshot() const {
  return BlockSnapshot{.num_blocks = num_blocks(),
                       .num_usable = num_usable_blocks(),
                       .num_free = num_free_blocks(),
                       .num_used = num_used_blocks(),
                       .peak_used = peak_used_};
}

void BlockManager::check_consistency() const {
  ENGINE_ASSERT(ref_counts_[kPaddingBlock] == 0, "padding block 0 has ref count ", ref_counts_[kPaddingBlock]);
  std::vector<int32_t> times_free(options_.num_blocks, 0);
  for (int32_t id : free_) {
    ENGINE_ASSERT(id >= 1 && id < options_.num_blocks, "free list holds invalid block ", id);
    ENGINE_ASSERT(++times_free[id] == 1, "block ", id, " is on the free list twice");
    ENGINE_ASSERT(ref_counts_[id] == 0, "free block ", id, " has ref count ", ref_counts_[id]);
  }
  for (int32_t id = 1; id < options_.num_blocks; ++id) {
    ENGINE_ASSERT(times_free[id] == 1 || ref_counts_[id] >= 1, "block ", id, " is neither free nor referenced");
  }
}

void BlockManager::check_id(int32_t block) const {
  ENGINE_ASSERT(block != kPaddingBlock, "block 0 is reserved for padding");
  ENGINE_ASSERT(block >= 1 && block < options_.num_blocks, "block id ", block, " out of range [1, ", options_.num_blocks, ")");
}

}  // namespace deepinfer::engine
