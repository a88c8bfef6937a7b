#pragma once
// BlockManager: the pool of KV blocks (block_size tokens each) as integer ids.
// Owns: the free list, a reference count per block, usage and its high watermark.
// Does not own: the tensors behind the ids (the model runner) or who gets blocks when
// (the Scheduler). Block 0 (kPaddingBlock) is reserved for padding rows and never handed out.

#include <cstdint>
#include <span>
#include <vector>

namespace deepinfer::engine {

struct BlockSnapshot {
  int32_t num_blocks = 0;  // including the reserved block 0
  int32_t num_usable = 0;  // num_blocks - 1
  int32_t num_free = 0;
  int32_t num_used = 0;
  int32_t peak_used = 0;  // high watermark since construction
};

class BlockManager final {
 public:
  struct Options {
    int32_t block_size = 128;  // tokens per block, >= 1
    int32_t num_blocks = 0;    // including the reserved block 0, >= 2
  };

  explicit BlockManager(Options options);

  int32_t block_size() const { return options_.block_size; }
  int32_t num_blocks() const { return options_.num_blocks; }
  int32_t num_usable_blocks() const { return options_.num_blocks - 1; }
  int32_t num_free_blocks() const { return static_cast<int32_t>(free_.size()); }
  int32_t num_used_blocks() const { return num_usable_blocks() - num_free_blocks(); }
  // Blocks that hold num_tokens tokens: ceil(num_tokens / block_size).
  int32_t blocks_for_tokens(int64_t num_tokens) const;

  bool can_allocate(int32_t n) const { return n <= num_free_blocks(); }
  // n fresh blocks with reference count 1 (lowest ids first on a fresh pool).
  // Throws InternalError if fewer than n are free.
  std::vector<int32_t> allocate(int32_t n);
  // One more owner of an allocated block (sharing); free() must then be called once per owner.
  void add_ref(int32_t block);
  // Drops one reference per id; a block whose count reaches 0 returns to the free list.
  // Throws InternalError on block 0, an id out of range or a block that is already free.
  void free(std::span<const int32_t> blocks);

  int32_t ref_count(int32_t block) const;
  BlockSnapshot snapshot() const;
  // Free list and reference counts agree (each id free exactly once or counted >= 1).
  void check_consistency() const;

 private:
  void check_id(int32_t block) const;

  Options options_;
  std::vector<int32_t> free_;        // stack: back() is handed out next
  std::vector<int32_t> ref_counts_;  // [num_blocks]
  int32_t peak_used_ = 0;
};

}  // namespace deepinfer::engine
