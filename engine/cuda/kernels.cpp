// The CUDA build's ATen bindings of engine/cuda/kernels.h.
#include "engine/cuda/kernels.h"

#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <deque>

#include "engine/cuda/gumbel_noise.h"

namespace deepinfer::engine::cuda {

bool gumbel_noise_supported(const at::Tensor& keys) {
  return keys.is_cuda() && keys.scalar_type() == at::kLong && keys.dim() == 2 && keys.size(1) == 2 && keys.size(0) <= kMaxRows;
}

at::Tensor gumbel_noise(const at::Tensor& keys, int64_t vocab_size) {
  TORCH_CHECK(gumbel_noise_supported(keys), "cuda::gumbel_noise: int64 CUDA keys [rows <= ", kMaxRows, ", 2] expected, got ",
              keys.scalar_type(), " ", keys.sizes(), " on ", keys.device());
  const at::Tensor k = keys.contiguous();
  at::Tensor out = at::empty({k.size(0), vocab_size}, k.options().dtype(at::kFloat));
  const c10::cuda::CUDAGuard guard(k.device());
  const cudaError_t error =
      cuda::gumbel_noise(k.data_ptr<int64_t>(), k.size(0), vocab_size, out.data_ptr<float>(), c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(error == cudaSuccess, "gumbel_noise: ", cudaGetErrorString(error));
  return out;
}

DeviceMemory device_memory(at::Device device) {
  TORCH_CHECK(device.is_cuda(), "cuda::device_memory: ", device, " is not a CUDA device");
  const c10::cuda::CUDAGuard guard(device);
  size_t free = 0, total = 0;
  const cudaError_t error = cudaMemGetInfo(&free, &total);
  TORCH_CHECK(error == cudaSuccess, "cudaMemGetInfo on ", device, ": ", cudaGetErrorString(error));
  DeviceMemory memory{.free = static_cast<int64_t>(free), .total = static_cast<int64_t>(total)};
  // The caching allocator knows the device only once it allocated there (its stats throw before).
  if (at::empty({1}, at::TensorOptions().device(device)).defined()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    constexpr size_t kAll = 0;  // StatType::AGGREGATE
    memory.allocated = stats.allocated_bytes[kAll].current;
    memory.peak_allocated = stats.allocated_bytes[kAll].peak;
    memory.peak_reserved = stats.reserved_bytes[kAll].peak;
  }
  return memory;
}

void reset_peak_memory(at::Device device) {
  TORCH_CHECK(device.is_cuda(), "cuda::reset_peak_memory: ", device, " is not a CUDA device");
  c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
}

struct EventTimeline::Impl {
  at::Device device;
  std::deque<at::cuda::CUDAEvent> events;  // a deque: recorded events never move
  size_t used = 0;
};

EventTimeline::EventTimeline(at::Device device) : impl_(std::make_unique<Impl>(Impl{device, {}, 0})) {
  TORCH_CHECK(device.is_cuda(), "EventTimeline: ", device, " is not a CUDA device");
}

EventTimeline::~EventTimeline() = default;

int64_t EventTimeline::record() {
  if (impl_->used == impl_->events.size()) impl_->events.emplace_back(cudaEventDefault);  // the default flags keep timing on
  at::cuda::CUDAEvent& event = impl_->events[impl_->used];
  event.record(c10::cuda::getCurrentCUDAStream(impl_->device.index()));
  return static_cast<int64_t>(impl_->used++);
}

double EventTimeline::elapsed_ms(int64_t from, int64_t to) {
  TORCH_CHECK(from >= 0 && to >= from && static_cast<size_t>(to) < impl_->used, "EventTimeline::elapsed_ms: events ", from, " and ", to,
              " of ", impl_->used);
  impl_->events[static_cast<size_t>(to)].synchronize();
  return impl_->events[static_cast<size_t>(from)].elapsed_time(impl_->events[static_cast<size_t>(to)]);
}

void EventTimeline::clear() { impl_->used = 0; }

GraphPool new_graph_pool() {
  const c10::cuda::MempoolId_t id = at::cuda::graph_pool_handle();
  return {static_cast<uint64_t>(id.first), static_cast<uint64_t>(id.second)};
}

struct CudaGraph::Impl {
  Impl(at::Device d, GraphPool p) : device(d), pool(p) {}
  at::Device device;
  GraphPool pool;
  at::cuda::CUDAGraph graph;
  bool captured = false;
};

c10::Stream own_stream(at::Device device) {
  TORCH_CHECK(device.is_cuda(), "cuda::own_stream: ", device, " is not a CUDA device");
  const c10::cuda::CUDAGuard guard(device);
  c10::cuda::device_synchronize();
  return c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index()).unwrap();
}

CudaGraph::CudaGraph(at::Device device, GraphPool pool) : impl_(std::make_unique<Impl>(device, pool)) {
  TORCH_CHECK(device.is_cuda(), "CudaGraph: ", device, " is not a CUDA device");
}

CudaGraph::~CudaGraph() = default;

void CudaGraph::capture(const std::function<void()>& body) {
  TORCH_CHECK(!impl_->captured, "CudaGraph::capture: already captured");
  const c10::cuda::CUDAGuard device_guard(impl_->device);
  TORCH_CHECK(c10::cuda::getCurrentCUDAStream() != c10::cuda::getDefaultCUDAStream(),
              "CudaGraph::capture: the current stream is the default stream (use cuda::own_stream)");
  c10::cuda::device_synchronize();
  impl_->graph.capture_begin({impl_->pool.first, impl_->pool.second}, cudaStreamCaptureModeThreadLocal);
  try {
    body();
  } catch (...) {
    try {
      impl_->graph.capture_end();
    } catch (...) {
    }
    throw;
  }
  impl_->graph.capture_end();
  impl_->captured = true;
}

void CudaGraph::replay() {
  TORCH_CHECK(impl_->captured, "CudaGraph::replay: nothing captured");
  const c10::cuda::CUDAGuard device_guard(impl_->device);
  impl_->graph.replay();
}

}  // namespace deepinfer::engine::cuda
