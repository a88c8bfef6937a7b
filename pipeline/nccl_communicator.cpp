#include "pipeline/nccl_communicator.h"

#include <mpi.h>

#include <exception>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <nccl.h>

namespace deepinfer::pipeline {
namespace {

void check_nccl(ncclResult_t result, const char* what) {
  if (result == ncclSuccess) return;
  throw std::runtime_error(std::string(what) + " failed: " + ncclGetErrorString(result));
}

int64_t row_bytes(const at::Tensor& t) {
  int64_t elems = 1;
  for (int64_t d = 1; d < t.dim(); ++d) elems *= t.size(d);
  return elems * static_cast<int64_t>(t.element_size());
}

class NcclCommunicator final : public model::ExpertCommunicator {
 public:
  explicit NcclCommunicator(at::Device device);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int64_t rank() const override { return rank_; }
  int64_t world_size() const override { return world_size_; }
  at::Tensor all_gather_rows(const at::Tensor& local, std::vector<int64_t>& counts) override;
  at::Tensor reduce_scatter_rows(const at::Tensor& full, const std::vector<int64_t>& counts) override;

 private:
  ncclComm_t comm_ = nullptr;
  int rank_ = 0;
  int world_size_ = 1;
  at::Device device_;
};

NcclCommunicator::NcclCommunicator(at::Device device) : device_(device) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  TORCH_CHECK(initialized, "NcclCommunicator: MPI is not initialized");
  TORCH_CHECK(device.is_cuda() && device.has_index(), "NcclCommunicator: want a CUDA device with an index, got ", device);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
  ncclUniqueId id;
  if (rank_ == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  TORCH_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD) == MPI_SUCCESS, "NcclCommunicator: MPI_Bcast of the NCCL id failed");
  const c10::cuda::CUDAGuard guard(device);
  check_nccl(ncclCommInitRank(&comm_, world_size_, id, rank_), "ncclCommInitRank");
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ == nullptr) return;
  // Unwinding from an error, this rank may have left a collective the others still wait in:
  // abort (no waiting for peers) instead of a destroy that could hang.
  if (std::uncaught_exceptions() > 0)
    ncclCommAbort(comm_);
  else
    ncclCommDestroy(comm_);
}

at::Tensor NcclCommunicator::all_gather_rows(const at::Tensor& local, std::vector<int64_t>& counts) {
  TORCH_CHECK(local.device() == device_, "NcclCommunicator::all_gather_rows: tensor on ", local.device(), ", want ", device_);
  TORCH_CHECK(local.dim() >= 1, "NcclCommunicator::all_gather_rows: want rows, got a scalar");
  const at::Tensor src = local.contiguous();
  int64_t mine = src.size(0);
  counts.assign(static_cast<std::size_t>(world_size_), 0);
  TORCH_CHECK(MPI_Allgather(&mine, 1, MPI_INT64_T, counts.data(), 1, MPI_INT64_T, MPI_COMM_WORLD) == MPI_SUCCESS,
              "NcclCommunicator: MPI_Allgather(counts) failed");
  std::vector<int64_t> shape = src.sizes().vec();
  shape[0] = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  at::Tensor out = at::empty(shape, src.options());
  const int64_t bytes = row_bytes(src);
  const c10::cuda::CUDAGuard guard(device_);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device_.index()).stream();
  auto* base = static_cast<char*>(out.data_ptr());
  int64_t offset = 0;
  check_nccl(ncclGroupStart(), "ncclGroupStart");
  for (int r = 0; r < world_size_; ++r) {
    const int64_t n = counts[static_cast<std::size_t>(r)] * bytes;
    if (n > 0) {
      const void* send = r == rank_ ? src.data_ptr() : base + offset;
      check_nccl(ncclBroadcast(send, base + offset, static_cast<size_t>(n), ncclUint8, r, comm_, stream), "ncclBroadcast");
    }
    offset += n;
  }
  check_nccl(ncclGroupEnd(), "ncclGroupEnd");
  return out;
}

at::Tensor NcclCommunicator::reduce_scatter_rows(const at::Tensor& full, const std::vector<int64_t>& counts) {
  TORCH_CHECK(full.device() == device_, "NcclCommunicator::reduce_scatter_rows: tensor on ", full.device(), ", want ", device_);
  TORCH_CHECK(full.scalar_type() == at::kFloat, "NcclCommunicator::reduce_scatter_rows: want float32, got ", full.scalar_type());
  TORCH_CHECK(static_cast<int64_t>(counts.size()) == world_size_, "reduce_scatter_rows: ", counts.size(), " counts for ", world_size_,
              " ranks");
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  TORCH_CHECK(full.dim() >= 1 && full.size(0) == total, "reduce_scatter_rows: ", full.size(0), " rows, counts sum to ", total);
  const at::Tensor src = full.contiguous();
  int64_t row_elems = 1;
  for (int64_t d = 1; d < src.dim(); ++d) row_elems *= src.size(d);
  std::vector<int64_t> shape = src.sizes().vec();
  shape[0] = counts[static_cast<std::size_t>(rank_)];
  at::Tensor out = at::empty(shape, src.options());
  const c10::cuda::CUDAGuard guard(device_);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device_.index()).stream();
  const float* base = src.data_ptr<float>();
  int64_t offset = 0;
  check_nccl(ncclGroupStart(), "ncclGroupStart");
  for (int r = 0; r < world_size_; ++r) {
    const int64_t n = counts[static_cast<std::size_t>(r)] * row_elems;
    if (n > 0) {
      void* recv = r == rank_ ? out.data_ptr() : const_cast<float*>(base + offset);
      check_nccl(ncclReduce(base + offset, recv, static_cast<size_t>(n), ncclFloat32, ncclSum, r, comm_, stream), "ncclReduce");
    }
    offset += n;
  }
  check_nccl(ncclGroupEnd(), "ncclGroupEnd");
  return out;
}

}  // namespace

void select_cuda_device(at::Device device) {
  if (device.is_cuda()) c10::cuda::set_device(device.index());
}

bool nccl_available() { return true; }

std::unique_ptr<model::ExpertCommunicator> make_nccl_communicator(at::Device device) { return std::make_unique<NcclCommunicator>(device); }

}  // namespace deepinfer::pipeline
