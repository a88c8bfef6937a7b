#include "engine/state_manager.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "engine/check.h"

namespace deepinfer::engine {
namespace {

TEST(StateManagerTest, RejectsBadOptions) { EXPECT_THROW(StateManager(StateManager::Options{.num_slots = 1}), std::invalid_argument); }

TEST(StateManagerTest, NeverHandsOutSlotZero) {
  StateManager manager(StateManager::Options{.num_slots = 3});
  EXPECT_EQ(manager.allocate(), 1);
  EXPECT_EQ(manager.allocate(), 2);
  EXPECT_FALSE(manager.can_allocate());
  EXPECT_THROW(manager.allocate(), std::logic_error);
  EXPECT_THROW(manager.free(0), InternalError);
  EXPECT_THROW(manager.free(3), InternalError);
  manager.check_consistency();
}

TEST(StateManagerTest, FreeAndSnapshot) {
  StateManager manager(StateManager::Options{.num_slots = 5});
  int32_t a = manager.allocate();
  int32_t b = manager.allocate();
  int32_t c = manager.allocate();
  manager.free(b);
  EXPECT_FALSE(manager.in_use(b));
  EXPECT_TRUE(manager.in_use(a));
  EXPECT_THROW(manager.free(b), std::logic_error);
  SlotSnapshot snapshot = manager.snapshot();
  EXPECT_EQ(snapshot.num_slots, 5);
  EXPECT_EQ(snapshot.num_usable, 4);
  EXPECT_EQ(snapshot.num_used, 2);
  EXPECT_EQ(snapshot.num_free, 2);
  EXPECT_EQ(snapshot.peak_used, 3);
  const int32_t both[] = {a, c};
  manager.free(both);
  EXPECT_EQ(manager.num_free_slots(), 4);
  manager.check_consistency();
}

}  // namespace
}  // namespace deepinfer::engine
