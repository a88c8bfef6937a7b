#include "engine/state_manager.h"

#include <algorithm>

#include "engine/check.h"
#include "engine/types.h"

namespace deepinfer::engine {

StateManager::StateManager(Options options) : options_(options) {
  ENGINE_CHECK(options_.num_slots >= 2, "num_slots must be >= 2 (slot 0 is reserved), got ", options_.num_slots);
  in_use_.assign(options_.num_slots, 0);
  free_.reserve(options_.num_slots - 1);
  for (int32_t id = options_.num_slots - 1; id >= 1; --id) free_.push_back(id);
}

int32_t StateManager::allocate() {
  ENGINE_ASSERT(can_allocate(), "allocate() with no free state slot (", num_usable_slots(), " usable)");
  int32_t slot = free_.back();
  free_.pop_back();
  ENGINE_ASSERT(!in_use_[slot], "free slot ", slot, " is marked in use");
  in_use_[slot] = 1;
  peak_used_ = std::max(peak_used_, num_used_slots());
  return slot;
}

void StateManager::free(int32_t slot) {
  check_id(slot);
  ENGINE_ASSERT(in_use_[slot], "double free of state slot ", slot);
  in_use_[slot] = 0;
  free_.push_back(slot);
}

void StateManager::free(std::span<const int32_t> slots) {
  for (int32_t slot : slots) free(slot);
}

bool StateManager::in_use(int32_t slot) const {
  check_id(slot);
  return in_use_[slot] != 0;
}

SlotSnapshot StateManager::snapshot() const {
  return SlotSnapshot{.num_slots = num_slots(),
                      .num_usable = num_usable_slots(),
                      .num_free = num_free_slots(),
                      .num_used = num_used_slots(),
                      .peak_used = peak_used_};
}

void StateManager::check_consistency() const {
  ENGINE_ASSERT(!in_use_[kPaddingSlot], "padding slot 0 is marked in use");
  std::vector<int32_t> times_free(options_.num_slots, 0);
  for (int32_t id : free_) {
    ENGINE_ASSERT(id >= 1 && id < options_.num_slots, "free list holds invalid slot ", id);
    ENGINE_ASSERT(++times_free[id] == 1, "slot ", id, " is on the free list twice");
    ENGINE_ASSERT(!in_use_[id], "free slot ", id, " is marked in use");
  }
  for (int32_t id = 1; id < options_.num_slots; ++id) {
    ENGINE_ASSERT(times_free[id] == 1 || in_use_[id], "slot ", id, " is neither free nor in use");
  }
}

void StateManager::check_id(int32_t slot) const {
  ENGINE_ASSERT(slot != kPaddingSlot, "state slot 0 is reserved for padding");
  ENGINE_ASSERT(slot >= 1 && slot < options_.num_slots, "state slot ", slot, " out of range [1, ", options_.num_slots, ")");
}

}  // namespace deepinfer::engine
