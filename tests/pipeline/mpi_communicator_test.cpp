// MpiCommunicator under `mpirun -np N`: all_gather_rows / reduce_scatter_rows equal the
// same operations done locally on every rank's (deterministic) data, also when some ranks
// have zero rows, for float32, bfloat16 and int64 rows. The NCCL backend (CUDA build, one GPU
// per rank) must give the same tensors as the MPI one.
#include <gtest/gtest.h>
#include <mpi.h>

#include "pipeline/mpi_communicator.h"
#include "pipeline/nccl_communicator.h"

namespace deepinfer::pipeline {
namespace {

// Rank r's local rows: `rows(r)` rows of [rows, 3] values derived from (r, tag).
at::Tensor local_rows(int64_t rank, int64_t rows, int64_t tag, at::ScalarType dtype) {
  return (at::arange(rows * 3, at::kFloat).reshape({rows, 3}) + 100 * rank + 1000 * tag).to(dtype);
}

TEST(MpiCommunicator, AllGatherAndReduceScatterMatchLocalComputation) {
  MpiCommunicator comm;
  const int64_t world = comm.world_size(), rank = comm.rank();
  // Pattern per round: ranks with zero rows in rounds 1 and 2 (all ranks zero in round 2).
  for (int64_t round = 0; round < 3; ++round) {
    auto rows_of = [&](int64_t r) -> int64_t { return round == 2 ? 0 : round == 1 && r % 2 == 1 ? 0 : r + 2; };
    for (auto dtype : {at::kFloat, at::kBFloat16, at::kLong}) {
      std::vector<int64_t> counts;
      const at::Tensor gathered = comm.all_gather_rows(local_rows(rank, rows_of(rank), round, dtype), counts);
      std::vector<at::Tensor> expected;
      for (int64_t r = 0; r < world; ++r) {
        EXPECT_EQ(counts[static_cast<std::size_t>(r)], rows_of(r));
        expected.push_back(local_rows(r, rows_of(r), round, dtype));
      }
      EXPECT_TRUE(at::equal(gathered, at::cat(expected))) << "round " << round << " dtype " << dtype;
    }
    // Every rank holds a different full partial: rank-scaled. The sum over ranks of rank r's slice.
    std::vector<int64_t> counts;
    for (int64_t r = 0; r < world; ++r) counts.push_back(rows_of(r));
    int64_t total = 0, offset = 0;
    for (int64_t r = 0; r < world; ++r) total += counts[static_cast<std::size_t>(r)];
    for (int64_t r = 0; r < rank; ++r) offset += counts[static_cast<std::size_t>(r)];
    const at::Tensor base = at::arange(total * 4, at::kFloat).reshape({total, 4});
    const at::Tensor mine = comm.reduce_scatter_rows(base * (rank + 1), counts);
    const double scale = static_cast<double>(world * (world + 1) / 2);
    EXPECT_TRUE(at::allclose(mine, base.narrow(0, offset, rows_of(rank)) * scale)) << "round " << round;
    EXPECT_EQ(mine.size(0), rows_of(rank));
  }
}

TEST(NcclCommunicator, MatchesMpiCommunicator) {
  MpiCommunicator mpi;
  if (!nccl_available()) GTEST_SKIP() << "this build has no NCCL backend (configure with -DDEEPINFER_CUDA=ON)";
  if (!at::hasCUDA() || static_cast<int64_t>(at::getNumGPUs()) < mpi.world_size())
    GTEST_SKIP() << "needs one GPU per rank: " << mpi.world_size() << " ranks, " << (at::hasCUDA() ? at::getNumGPUs() : 0) << " GPUs";
  const at::Device cuda(at::kCUDA, static_cast<c10::DeviceIndex>(mpi.rank()));
  select_cuda_device(cuda);
  const auto nccl = make_nccl_communicator(cuda);
  const int64_t rank = mpi.rank(), world = mpi.world_size();
  for (int64_t round = 0; round < 3; ++round) {
    auto rows_of = [&](int64_t r) -> int64_t { return round == 2 ? 0 : round == 1 && r % 2 == 1 ? 0 : 5 * r + 3; };
    for (auto dtype : {at::kFloat, at::kBFloat16, at::kLong}) {
      const at::Tensor local = local_rows(rank, rows_of(rank), round, dtype);
      std::vector<int64_t> want_counts, got_counts;
      const at::Tensor want = mpi.all_gather_rows(local, want_counts);
      const at::Tensor got = nccl->all_gather_rows(local.to(cuda), got_counts);
      EXPECT_EQ(got_counts, want_counts);
      EXPECT_TRUE(at::equal(got.cpu(), want)) << "round " << round << " dtype " << dtype;
    }
    std::vector<int64_t> counts;
    int64_t total = 0;
    for (int64_t r = 0; r < world; ++r) total += counts.emplace_back(rows_of(r));
    const at::Tensor partial = at::arange(total * 4, at::kFloat).reshape({total, 4}) * (rank + 1) + 0.25;
    const at::Tensor want = mpi.reduce_scatter_rows(partial, counts);
    const at::Tensor got = nccl->reduce_scatter_rows(partial.to(cuda), counts);
    EXPECT_TRUE(at::allclose(got.cpu(), want)) << "round " << round;
  }
}

TEST(MpiCommunicator, AgreesOnFlagsAndGathersStrings) {
  MpiCommunicator comm;
  const auto any = mpi_any_rank({comm.rank() == 1, false, true});
  EXPECT_EQ(any, (std::vector<bool>{comm.world_size() > 1, false, true}));
  const auto strings = mpi_gather_strings(std::string(static_cast<std::size_t>(comm.rank()), 'x'));
  if (comm.rank() == 0) {
    ASSERT_EQ(static_cast<int64_t>(strings.size()), comm.world_size());
    for (int64_t r = 0; r < comm.world_size(); ++r)
      EXPECT_EQ(strings[static_cast<std::size_t>(r)], std::string(static_cast<std::size_t>(r), 'x'));
  } else {
    EXPECT_TRUE(strings.empty());
  }
}

}  // namespace
}  // namespace deepinfer::pipeline

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  const int result = RUN_ALL_TESTS();
  int worst = 0;
  MPI_Allreduce(&result, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
