// The CPU build's KernelBusyMeter (engine/cuda/kernel_busy_absent.cpp): it says it is unavailable
// and gives no figures. Built only without DEEPINFER_CUDA; label cpu.
#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>
#include <string>

#include "engine/cuda/kernel_busy.h"

namespace deepinfer::engine::cuda {
namespace {

void expect_unavailable(const std::function<void()>& call) {
  try {
    call();
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("needs the CUDA build"), std::string::npos) << e.what();
  }
}

TEST(KernelBusyMeterAbsent, SaysItIsUnavailable) {
  EXPECT_FALSE(KernelBusyMeter::available());
  KernelBusyMeter meter;
  expect_unavailable([&] { meter.start(); });
  expect_unavailable([&] { meter.stop(); });
}

}  // namespace
}  // namespace deepinfer::engine::cuda
