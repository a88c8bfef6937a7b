#pragma once
// Expert parallelism: the MoE layer computes only the routed experts this rank holds and
// exchanges tokens through an ExpertCommunicator.
//
// Exchange scheme (all-gather + reduce-scatter, lockstep):
//   1. every rank routes its own tokens (router and shared expert are replicated);
//   2. all_gather_rows() collects every rank's hidden rows [T_r, D], expert ids [T_r, k] and
//      routing weights [T_r, k] in rank order, with the per-rank row counts;
//   3. each rank runs its own experts over all gathered (token, expert) pairs into a float32
//      partial sum [sum T_r, D] (zero rows where it owns none of a token's experts);
//   4. reduce_scatter_rows() sums the partials over ranks and hands each rank back its own
//      T_r rows; the rank adds its shared expert.
// Every rank makes the same calls in the same order in every MoE layer, also with T_r = 0,
// so MPI/NCCL backends can run them as plain collectives (counts first, then payload).
// Owns: the interface, the single-rank implementation and the expert partition.
// Does not own: MPI/NCCL backends (the EP issue), or the MoE math (moe.h).

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "model/weight_specs.h"

namespace deepinfer::model {

class ExpertCommunicator {
 public:
  virtual ~ExpertCommunicator() = default;
  virtual int64_t rank() const = 0;
  virtual int64_t world_size() const = 0;

  // local [n_r, ...] -> [sum_r n_r, ...]: every rank's rows in rank order (same trailing shape
  // and dtype on all ranks). counts[r] = n_r on return.
  virtual at::Tensor all_gather_rows(const at::Tensor& local, std::vector<int64_t>& counts) = 0;
  // full [sum_r counts[r], ...] on every rank -> the element-wise sum over ranks of the rows
  // [offset_rank, offset_rank + counts[rank]) of this rank.
  virtual at::Tensor reduce_scatter_rows(const at::Tensor& full, const std::vector<int64_t>& counts) = 0;
};

// World of one: gathers return the input, the reduce-scatter returns its input.
class SingleRankCommunicator final : public ExpertCommunicator {
 public:
  int64_t rank() const override { return 0; }
  int64_t world_size() const override { return 1; }
  at::Tensor all_gather_rows(const at::Tensor& local, std::vector<int64_t>& counts) override {
    counts.assign(1, local.size(0));
    return local;
  }
  at::Tensor reduce_scatter_rows(const at::Tensor& full, const std::vector<int64_t>& counts) override {
    TORCH_CHECK(counts.size() == 1 && counts[0] == full.size(0), "reduce_scatter_rows: counts do not match ", full.size(0), " rows");
    return full;
  }
};

// The routed experts rank `rank` of `world_size` holds: contiguous, sizes differ by at most one.
inline ExpertRange expert_range_for_rank(int64_t num_experts, int64_t rank, int64_t world_size) {
  TORCH_CHECK(world_size > 0 && rank >= 0 && rank < world_size, "expert_range_for_rank: bad rank ", rank, " of ", world_size);
  TORCH_CHECK(num_experts >= world_size, "expert_range_for_rank: ", num_experts, " experts cannot be split over ", world_size, " ranks");
  const int64_t base = num_experts / world_size, extra = num_experts % world_size;
  const int64_t first = rank * base + std::min(rank, extra);
  return ExpertRange{first, first + base + (rank < extra ? 1 : 0)};
}

}  // namespace deepinfer::model
