#include "pipeline/mpi_communicator.h"

#include <mpi.h>

#include <limits>
#include <numeric>
#include <stdexcept>

namespace deepinfer::pipeline {
namespace {

void check_mpi(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw std::runtime_error(std::string(what) + " failed: " + std::string(text, static_cast<std::size_t>(length)));
}

int to_int(int64_t value, const char* what) {
  TORCH_CHECK(value >= 0 && value <= std::numeric_limits<int>::max(), what, ": ", value, " does not fit an MPI count");
  return static_cast<int>(value);
}

}  // namespace

MpiCommunicator::MpiCommunicator() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  TORCH_CHECK(initialized, "MpiCommunicator: MPI is not initialized");
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
}

at::Tensor MpiCommunicator::all_gather_rows(const at::Tensor& local, std::vector<int64_t>& counts) {
  TORCH_CHECK(local.device().is_cpu(), "MpiCommunicator::all_gather_rows: tensor on ", local.device(), ", want CPU");
  TORCH_CHECK(local.dim() >= 1, "MpiCommunicator::all_gather_rows: want rows, got a scalar");
  const at::Tensor src = local.contiguous();
  int64_t row_elems = 1;
  for (int64_t d = 1; d < src.dim(); ++d) row_elems *= src.size(d);
  const int64_t bytes_per_row = row_elems * static_cast<int64_t>(src.element_size());
  int64_t mine = src.size(0);
  counts.assign(static_cast<std::size_t>(world_size_), 0);
  check_mpi(MPI_Allgather(&mine, 1, MPI_INT64_T, counts.data(), 1, MPI_INT64_T, MPI_COMM_WORLD), "MPI_Allgather(counts)");
  std::vector<int> byte_counts(counts.size()), displs(counts.size());
  int64_t total_rows = 0, offset = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    byte_counts[r] = to_int(counts[r] * bytes_per_row, "all_gather_rows bytes");
    displs[r] = to_int(offset, "all_gather_rows offset");
    offset += counts[r] * bytes_per_row;
    total_rows += counts[r];
  }
  std::vector<int64_t> shape = src.sizes().vec();
  shape[0] = total_rows;
  at::Tensor out = at::empty(shape, src.options());
  char dummy = 0;  // zero rows: still a valid buffer for the collective
  check_mpi(MPI_Allgatherv(mine > 0 ? src.data_ptr() : &dummy, byte_counts[static_cast<std::size_t>(rank_)], MPI_BYTE,
                           total_rows > 0 ? out.data_ptr() : &dummy, byte_counts.data(), displs.data(), MPI_BYTE, MPI_COMM_WORLD),
            "MPI_Allgatherv(rows)");
  return out;
}

at::Tensor MpiCommunicator::reduce_scatter_rows(const at::Tensor& full, const std::vector<int64_t>& counts) {
  TORCH_CHECK(full.device().is_cpu(), "MpiCommunicator::reduce_scatter_rows: tensor on ", full.device(), ", want CPU");
  TORCH_CHECK(full.scalar_type() == at::kFloat, "MpiCommunicator::reduce_scatter_rows: want float32, got ", full.scalar_type());
  TORCH_CHECK(static_cast<int64_t>(counts.size()) == world_size_, "reduce_scatter_rows: ", counts.size(), " counts for ", world_size_,
              " ranks");
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  TORCH_CHECK(full.dim() >= 1 && full.size(0) == total, "reduce_scatter_rows: ", full.size(0), " rows, counts sum to ", total);
  const at::Tensor src = full.contiguous();
  int64_t row_elems = 1;
  for (int64_t d = 1; d < src.dim(); ++d) row_elems *= src.size(d);
  std::vector<int> elem_counts(counts.size());
  for (std::size_t r = 0; r < counts.size(); ++r) elem_counts[r] = to_int(counts[r] * row_elems, "reduce_scatter_rows elements");
  std::vector<int64_t> shape = src.sizes().vec();
  shape[0] = counts[static_cast<std::size_t>(rank_)];
  at::Tensor out = at::empty(shape, src.options());
  // MPI_Reduce_scatter with a zero total is still a valid collective; pass a dummy buffer then.
  float dummy = 0;
  void* send = total > 0 ? src.data_ptr() : &dummy;
  void* recv = out.numel() > 0 ? out.data_ptr() : &dummy;
  check_mpi(MPI_Reduce_scatter(send, recv, elem_counts.data(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "MPI_Reduce_scatter");
  return out;
}

std::vector<bool> mpi_any_rank(const std::vector<bool>& local) {
  std::vector<int> flags(local.begin(), local.end()), all(local.size());
  check_mpi(MPI_Allreduce(flags.data(), all.data(), static_cast<int>(flags.size()), MPI_INT, MPI_LOR, MPI_COMM_WORLD),
            "MPI_Allreduce(flags)");
  return {all.begin(), all.end()};
}

std::vector<std::string> mpi_gather_strings(const std::string& local) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int length = to_int(static_cast<int64_t>(local.size()), "mpi_gather_strings length");
  std::vector<int> lengths(static_cast<std::size_t>(size)), displs(static_cast<std::size_t>(size));
  check_mpi(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Gather(lengths)");
  int64_t total = 0;
  for (int r = 0; r < size; ++r) {
    displs[static_cast<std::size_t>(r)] = to_int(total, "mpi_gather_strings offset");
    total += lengths[static_cast<std::size_t>(r)];
  }
  std::string all(rank == 0 ? static_cast<std::size_t>(total) : 0, '\0');
  char dummy = 0;
  check_mpi(MPI_Gatherv(local.empty() ? &dummy : local.data(), length, MPI_CHAR, all.empty() ? &dummy : all.data(), lengths.data(),
                        displs.data(), MPI_CHAR, 0, MPI_COMM_WORLD),
            "MPI_Gatherv(strings)");
  std::vector<std::string> out;
  if (rank != 0) return out;
  for (int r = 0; r < size; ++r)
    out.push_back(all.substr(static_cast<std::size_t>(displs[static_cast<std::size_t>(r)]),
                             static_cast<std::size_t>(lengths[static_cast<std::size_t>(r)])));
  return out;
}

void mpi_barrier() { check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

}  // namespace deepinfer::pipeline
