#pragma once
// StepStaging: a step's small inputs (token ids, positions, block tables, slots, sample rows,
// sampling parameters), built on the host, sent to the device with one asynchronous copy from
// pinned memory, so that building a step never waits for the device (issue 19: no host sync in
// execute). Two pinned host buffers alternate: the host fills one while the copy from the other
// may still be queued (before reusing a buffer it waits for that buffer's copy, which finished
// long before in the step loop: step N-1's results were read before step N+1 is built). One
// device buffer holds the current step's inputs: stream order puts step N's kernels before step
// N+1's copy over them. The device buffer moves only when a step needs more bytes than it holds;
// generation() counts the moves, since a CUDA graph captured over views of it is stale after one.
// On the CPU the same packing happens into a plain host buffer (one code path, no pinning).
// Owns: the buffers. Does not own: what the tensors mean.

#include <ATen/ATen.h>
#include <c10/core/Event.h>

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

namespace deepinfer::model {

class StepStaging {
 public:
  explicit StepStaging(at::Device device);
  ~StepStaging();
  StepStaging(const StepStaging&) = delete;
  StepStaging& operator=(const StepStaging&) = delete;

  // Replaces each defined CPU tensor by a tensor of the same dtype and shape on the device, each
  // a view of the one device buffer that a single copy, queued on the device's current stream,
  // fills. Every section starts at a multiple of 16 bytes, in the order given, so the same list of
  // shapes always lands at the same device addresses (while generation() holds).
  void upload(const std::vector<at::Tensor*>& tensors);

  int64_t generation() const { return generation_; }
  const void* device_base() const;

 private:
  at::Tensor& host_buffer(int64_t bytes);
  void reserve_device(int64_t bytes);

  at::Device device_;
  std::array<at::Tensor, 2> host_;
  std::array<std::unique_ptr<c10::Event>, 2> copied_;  // recorded after the copy from host_[i]
  int next_ = 0;
  at::Tensor device_buffer_;
  int64_t generation_ = 0;
};

}  // namespace deepinfer::model
