// The CPU build's engine/cuda/kernel_busy.h: no CUPTI, so no figures; start() and stop() say so.
#include <stdexcept>
#include <string>

#include "engine/cuda/kernel_busy.h"

namespace deepinfer::engine::cuda {
namespace {

[[noreturn]] void unavailable(const char* what) {
  throw std::runtime_error(
      std::string("KernelBusyMeter::") + what +
      ": unavailable in this build; it needs the CUDA build (cmake -DDEEPINFER_CUDA=ON), where CUPTI records the kernels");
}

}  // namespace

bool KernelBusyMeter::available() { return false; }
KernelBusyMeter::KernelBusyMeter() = default;
KernelBusyMeter::~KernelBusyMeter() = default;
void KernelBusyMeter::start() { unavailable("start"); }
KernelBusy KernelBusyMeter::stop() { unavailable("stop"); }

}  // namespace deepinfer::engine::cuda
