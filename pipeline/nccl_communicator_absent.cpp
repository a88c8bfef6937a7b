// The CPU build's pipeline/nccl_communicator.h: no NCCL backend (nccl_communicator.cpp is built
// only with DEEPINFER_CUDA=ON).
#include "pipeline/nccl_communicator.h"

#include <stdexcept>
#include <string>

namespace deepinfer::pipeline {

void select_cuda_device(at::Device) {}

bool nccl_available() { return false; }

std::unique_ptr<model::ExpertCommunicator> make_nccl_communicator(at::Device device) {
  throw std::runtime_error("multi-rank runs on " + device.str() + " need the NCCL backend: build with -DDEEPINFER_CUDA=ON");
}

}  // namespace deepinfer::pipeline
