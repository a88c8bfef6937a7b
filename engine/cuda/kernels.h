#pragma once
// The engine's CUDA kernels as ATen functions: the seam between the sampler's device-neutral
// code and the torch-free kernels beside this header (*.cu). kernels.cpp implements it in the
// CUDA build; kernels_absent.cpp in the CPU build, where *_supported() is false and the rest
// throw. Callers choose by the tensor's device at run time; no #if outside engine/cuda/.

#include <ATen/ATen.h>
#include <c10/core/Stream.h>

#include <cstdint>
#include <functional>
#include <memory>

namespace deepinfer::engine::cuda {

// Gumbel noise (gumbel_noise.h): keys int64 [rows, 2] on CUDA, rows <= 65535 -> [rows, vocab]
// float32, bit for bit sampler_ops.h's ATen noise.
bool gumbel_noise_supported(const at::Tensor& keys);
at::Tensor gumbel_noise(const at::Tensor& keys, int64_t vocab_size);

// A CUDA device's memory: free and total as the driver reports them (cudaMemGetInfo), and the
// peak of LibTorch's caching allocator since the process started (or reset_peak_memory()).
struct DeviceMemory {
  int64_t free = 0;
  int64_t total = 0;
  int64_t allocated = 0;  // the caching allocator's bytes in use now
  int64_t peak_allocated = 0;
  int64_t peak_reserved = 0;
};
DeviceMemory device_memory(at::Device device);
void reset_peak_memory(at::Device device);

// Events on the current CUDA stream of a device, for timing parts of a step without a host sync
// per part (engine/part_timer.h). record() enqueues an event and returns its index;
// elapsed_ms(a, b) waits for event b and returns the GPU time from a to b; clear() forgets them
// (their CUDA events are reused).
class EventTimeline final {
 public:
  explicit EventTimeline(at::Device device);
  ~EventTimeline();
  EventTimeline(const EventTimeline&) = delete;
  EventTimeline& operator=(const EventTimeline&) = delete;

  int64_t record();
  double elapsed_ms(int64_t from, int64_t to);
  void clear();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A stream of its own on a CUDA device (from the pool; never the default stream, on which CUDA
// graphs cannot be captured), for the model runner's steps; after a device synchronize, so what
// was queued before (weights, the cache) is done when the stream's work starts.
c10::Stream own_stream(at::Device device);

// The id of a memory pool that CUDA graphs can share (at::cuda::graph_pool_handle()): graphs that
// replay one at a time, in stream order, can allocate from one pool. A pool whose graphs were all
// destroyed cannot take a new graph (LibTorch's allocator asserts), so its owner keeps at least one
// graph alive until it is done with the pool (DecodeGraphs retires stale graphs, never frees them).
struct GraphPool {
  uint64_t first = 0, second = 0;
};
GraphPool new_graph_pool();

// A CUDA graph (at::cuda::CUDAGraph). capture() records what `body` queues on the device's
// current stream (not the default one), after a device synchronize (as torch.cuda.graph does),
// into `pool` (whoever keeps a captured tensor keeps its memory); nothing runs. `body`'s host code
// runs once, during the capture. replay() queues the recorded work on the current stream.
class CudaGraph final {
 public:
  CudaGraph(at::Device device, GraphPool pool);
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  void capture(const std::function<void()>& body);
  void replay();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace deepinfer::engine::cuda
