#pragma once
// Device helpers for benchmarks: a name for the hardware and an interval timer that waits for
// queued device work. bench_device_cpu.cpp serves CPU-only builds; bench_device_cuda.cpp
// (built with DEEPINFER_CUDA) adds CUDA events and device properties.

#include <ATen/ATen.h>

#include <memory>
#include <string>

namespace deepinfer::bench {

// "NVIDIA H200 (sm_90, 132 SMs, 139 GiB)" or "CPU, 2 ATen threads".
std::string describe_device(at::Device device);

// Measures device time between start() and stop() in milliseconds (CUDA events on the current
// stream on a GPU; a steady clock on the CPU). stop() waits for the device.
class DeviceTimer {
 public:
  virtual ~DeviceTimer() = default;
  virtual void start() = 0;
  virtual double stop_ms() = 0;
};

std::unique_ptr<DeviceTimer> make_timer(at::Device device);

}  // namespace deepinfer::bench
