// The CPU build's engine/cuda/kernels.h: no kernels (a CPU LibTorch makes no CUDA tensors).
#include "engine/cuda/kernels.h"

namespace deepinfer::engine::cuda {

bool gumbel_noise_supported(const at::Tensor&) { return false; }

at::Tensor gumbel_noise(const at::Tensor&, int64_t) {
  TORCH_CHECK(false, "cuda::gumbel_noise needs the CUDA build (cmake -DDEEPINFER_CUDA=ON)");
}

DeviceMemory device_memory(at::Device device) {
  TORCH_CHECK(false, "cuda::device_memory on ", device, " needs the CUDA build (cmake -DDEEPINFER_CUDA=ON)");
}
void reset_peak_memory(at::Device) {}

struct EventTimeline::Impl {};

EventTimeline::EventTimeline(at::Device device) {
  TORCH_CHECK(false, "EventTimeline on ", device, " needs the CUDA build (cmake -DDEEPINFER_CUDA=ON)");
}
EventTimeline::~EventTimeline() = default;
int64_t EventTimeline::record() { return 0; }
double EventTimeline::elapsed_ms(int64_t, int64_t) { return 0; }
void EventTimeline::clear() {}

c10::Stream own_stream(at::Device device) {
  TORCH_CHECK(false, "cuda::own_stream on ", device, " needs the CUDA build (cmake -DDEEPINFER_CUDA=ON)");
}

GraphPool new_graph_pool() { return {}; }

struct CudaGraph::Impl {};

CudaGraph::CudaGraph(at::Device device, GraphPool) {
  TORCH_CHECK(false, "CudaGraph on ", device, " needs the CUDA build (cmake -DDEEPINFER_CUDA=ON)");
}
CudaGraph::~CudaGraph() = default;
void CudaGraph::capture(const std::function<void()>&) {}
void CudaGraph::replay() {}

}  // namespace deepinfer::engine::cuda
