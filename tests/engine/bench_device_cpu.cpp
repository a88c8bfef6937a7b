// bench_device.h for builds without CUDA: a CUDA device cannot occur here.

#include <ATen/Parallel.h>

#include "tests/engine/bench_device.h"

namespace deepinfer::bench {
std::string describe_device(at::Device device) {
  TORCH_CHECK(device.is_cpu(), "this build has no CUDA support; device ", device, " is unavailable");
  return "CPU, " + std::to_string(at::get_num_threads()) + " ATen threads";
}

std::unique_ptr<DeviceTimer> make_timer(at::Device device) {
  TORCH_CHECK(device.is_cpu(), "this build has no CUDA support; device ", device, " is unavailable");
  return std::make_unique<CpuTimer>();
}

}  // namespace deepinfer::bench
