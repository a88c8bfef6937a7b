#pragma once
// StateManager: the pool of per-sequence state slots (V4 sliding-window ring and compressor
// tails) as integer ids. One slot per running sequence, released together with its blocks.
// Owns: the free list, which slots are in use, usage and its high watermark.
// Does not own: the state tensors (the model runner). Slot 0 (kPaddingSlot) is reserved for
// padding rows and never handed out.

#include <cstdint>
#include <span>
#include <vector>

namespace deepinfer::engine {

struct SlotSnapshot {
  int32_t num_slots = 0;   // including the reserved slot 0
  int32_t num_usable = 0;  // num_slots - 1
  int32_t num_free = 0;
  int32_t num_used = 0;
  int32_t peak_used = 0;  // high watermark since construction
};

class StateManager final {
 public:
  struct Options {
    int32_t num_slots = 0;  // including the reserved slot 0, >= 2
  };

  explicit StateManager(Options options);

  int32_t num_slots() const { return options_.num_slots; }
  int32_t num_usable_slots() const { return options_.num_slots - 1; }
  int32_t num_free_slots() const { return static_cast<int32_t>(free_.size()); }
  int32_t num_used_slots() const { return num_usable_slots() - num_free_slots(); }

  bool can_allocate() const { return !free_.empty(); }
  // A free slot (lowest ids first on a fresh pool). Throws InternalError if none is free.
  int32_t allocate();
  // Throws InternalError on slot 0, an id out of range or a slot that is already free.
  void free(int32_t slot);
  void free(std::span<const int32_t> slots);

  bool in_use(int32_t slot) const;
  SlotSnapshot snapshot() const;
  void check_consistency() const;

 private:
  void check_id(int32_t slot) const;

  Options options_;
  std::vector<int32_t> free_;  // stack: back() is handed out next
  std::vector<char> in_use_;   // [num_slots]
  int32_t peak_used_ = 0;
};

}  // namespace deepinfer::engine
