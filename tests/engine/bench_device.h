#pragma once
// Device helpers for benchmarks: a name for the hardware and an interval timer that waits for
// queued device work. bench_device_cpu.cpp serves CPU-only builds; bench_device_cuda.cpp
// (built with DEEPINFER_CUDA) adds CUDA events and device properties.

#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

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

// Wall-clock timer for the CPU.
class CpuTimer final : public DeviceTimer {
 public:
  void start() override { start_ = std::chrono::steady_clock::now(); }
  double stop_ms() override { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count(); }

 private:
  std::chrono::steady_clock::time_point start_;
};

std::unique_ptr<DeviceTimer> make_timer(at::Device device);

// Device milliseconds of `iters` calls of `call` after `warmup` untimed ones, in call order.
inline std::vector<double> time_calls(at::Device device, int warmup, int iters, const std::function<void()>& call) {
  for (int i = 0; i < warmup; ++i) call();
  auto timer = make_timer(device);
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    timer->start();
    call();
    ms.push_back(timer->stop_ms());
  }
  return ms;
}

// The "--key value" pairs of a command line, in order; throws naming a key without a value.
inline std::vector<std::pair<std::string, std::string>> option_pairs(int argc, char** argv) {
  std::vector<std::pair<std::string, std::string>> pairs;
  for (int i = 1; i < argc; i += 2) {
    TORCH_CHECK(i + 1 < argc, "missing value after ", argv[i]);
    pairs.emplace_back(argv[i], argv[i + 1]);
  }
  return pairs;
}

// A benchmark's main(): body()'s exit status, or "NAME: message" on stderr and 1 on an exception.
template <typename Body>
int bench_main(const char* name, Body body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace deepinfer::bench
