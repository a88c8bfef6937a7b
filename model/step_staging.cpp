#include "model/step_staging.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <cstring>
#include <thread>

namespace deepinfer::model {
namespace {

constexpr int64_t kAlign = 16;

int64_t aligned(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

int64_t nbytes(const at::Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

c10::Stream current_stream(at::Device device) { return c10::impl::getDeviceGuardImpl(device.type())->getStream(device); }

}  // namespace

StepStaging::StepStaging(at::Device device) : device_(device) {}

StepStaging::~StepStaging() = default;

const void* StepStaging::device_base() const { return device_buffer_.defined() ? device_buffer_.data_ptr() : nullptr; }

at::Tensor& StepStaging::host_buffer(int64_t bytes) {
  const int i = next_;
  next_ = 1 - next_;
  if (copied_[i]) {
    // The copy from this buffer was queued two uploads ago; its step's results have been read since.
    while (!copied_[i]->query()) std::this_thread::yield();
  }
  if (!host_[i].defined() || host_[i].numel() < bytes) {
    const bool pin = !device_.is_cpu();
    host_[i] = at::empty({std::max<int64_t>(bytes, 2 * (host_[i].defined() ? host_[i].numel() : 0))},
                         at::TensorOptions().dtype(at::kByte).pinned_memory(pin));
  }
  return host_[i];
}

void StepStaging::reserve_device(int64_t bytes) {
  if (device_buffer_.defined() && device_buffer_.numel() >= bytes) return;
  const int64_t held = device_buffer_.defined() ? device_buffer_.numel() : 0;
  device_buffer_ = at::empty({std::max<int64_t>(bytes, 2 * held)}, at::TensorOptions().dtype(at::kByte).device(device_));
  ++generation_;
}

void StepStaging::upload(const std::vector<at::Tensor*>& tensors) {
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (const at::Tensor* t : tensors) {
    TORCH_CHECK(!t->defined() || (t->device().is_cpu() && t->is_contiguous()),
                "StepStaging::upload: contiguous CPU tensors expected, got one on ", t->device());
    offsets.push_back(total);
    if (t->defined()) total += aligned(nbytes(*t));
  }
  at::Tensor& host = host_buffer(std::max<int64_t>(total, kAlign));
  auto* base = static_cast<unsigned char*>(host.data_ptr());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i]->defined() && nbytes(*tensors[i]) > 0) std::memcpy(base + offsets[i], tensors[i]->data_ptr(), nbytes(*tensors[i]));
  }
  reserve_device(std::max<int64_t>(total, kAlign));
  if (total > 0) device_buffer_.narrow(0, 0, total).copy_(host.narrow(0, 0, total), /*non_blocking=*/true);
  if (!device_.is_cpu()) {
    const int used = 1 - next_;  // host_buffer() flipped next_
    if (!copied_[used]) copied_[used] = std::make_unique<c10::Event>(device_.type());
    copied_[used]->record(current_stream(device_));
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    at::Tensor& t = *tensors[i];
    if (!t.defined()) continue;
    t = device_buffer_.narrow(0, offsets[i], nbytes(t)).view(t.scalar_type()).view(t.sizes());
  }
}

}  // namespace deepinfer::model
