#pragma once
// The MPI side of a multi-rank job on CPU tensors (one process per rank, MPI_COMM_WORLD):
// the ExpertCommunicator backend the MoE layers use, and the small collectives the job's
// lockstep loop and its end need (agree on busy/stop, gather strings to rank 0, barrier).
// Owns: the MPI calls. Does not own: MPI_Init/MPI_Finalize/MPI_Abort (launch/), the MoE math.
// Every call is a collective: all ranks make it in the same order, also with zero rows.

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "model/expert_parallel.h"

namespace deepinfer::pipeline {

class MpiCommunicator final : public model::ExpertCommunicator {
 public:
  MpiCommunicator();  // MPI must be initialized; ranks of MPI_COMM_WORLD

  int64_t rank() const override { return rank_; }
  int64_t world_size() const override { return world_size_; }

  // local [n_r, ...] contiguous CPU -> [sum_r n_r, ...]: counts exchanged first (MPI_Allgather),
  // then the rows (MPI_Allgatherv over bytes, so any dtype works).
  at::Tensor all_gather_rows(const at::Tensor& local, std::vector<int64_t>& counts) override;
  // full [sum_r counts[r], ...] float32 -> this rank's rows summed over ranks (MPI_Reduce_scatter).
  at::Tensor reduce_scatter_rows(const at::Tensor& full, const std::vector<int64_t>& counts) override;

 private:
  int rank_ = 0;
  int world_size_ = 1;
};

// Logical OR of every rank's flags (one MPI_Allreduce of all of them).
std::vector<bool> mpi_any_rank(const std::vector<bool>& local);
// Rank 0 receives every rank's string in rank order; other ranks receive {}.
std::vector<std::string> mpi_gather_strings(const std::string& local);
void mpi_barrier();

}  // namespace deepinfer::pipeline
