// bench_device.h for CUDA builds: CUDA events on the current stream, device properties.

#include <ATen/Parallel.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>

#include "tests/engine/bench_device.h"

namespace deepinfer::bench {
namespace {

class CudaTimer final : public DeviceTimer {
 public:
  void start() override { begin_.record(); }
  double stop_ms() override {
    end_.record();
    end_.synchronize();
    return begin_.elapsed_time(end_);
  }

 private:
  at::cuda::CUDAEvent begin_{cudaEventDefault};  // the default flags disable timing
  at::cuda::CUDAEvent end_{cudaEventDefault};
};

}  // namespace

std::string describe_device(at::Device device) {
  if (device.is_cpu()) return "CPU, " + std::to_string(at::get_num_threads()) + " ATen threads";
  TORCH_CHECK(device.is_cuda(), "unsupported device ", device);
  const cudaDeviceProp* p = at::cuda::getDeviceProperties(device.has_index() ? device.index() : c10::DeviceIndex{0});
  return std::string(p->name) + " (sm_" + std::to_string(p->major) + std::to_string(p->minor) + ", " +
         std::to_string(p->multiProcessorCount) + " SMs, " + std::to_string(p->totalGlobalMem >> 30) + " GiB)";
}

std::unique_ptr<DeviceTimer> make_timer(at::Device device) {
  if (device.is_cpu()) return std::make_unique<CpuTimer>();
  TORCH_CHECK(device.is_cuda(), "unsupported device ", device);
  return std::make_unique<CudaTimer>();
}

}  // namespace deepinfer::bench
