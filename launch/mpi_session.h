#pragma once
// MPI's lifetime in one `deepinfer generate` process. MPI is initialized only when a launcher
// started the process (mpirun sets OMPI_COMM_WORLD_SIZE / PMIX_RANK / PMI_SIZE); a plain run
// is a world of one without MPI. The only place that calls MPI_Init, MPI_Finalize and
// MPI_Abort: a failing rank prints "rank R failed: ..." and aborts the whole job, so no rank
// waits forever in a collective.
// Owns: MPI init/finalize/abort, gathering the ranks' outcomes. Does not own: collectives of
// the job (pipeline/mpi_communicator.h).

#include <string>
#include <vector>

#include "pipeline/job_stats.h"

namespace deepinfer::launch {

class MpiSession final {
 public:
  MpiSession();   // MPI_Init when launched by mpirun
  ~MpiSession();  // MPI_Finalize
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  bool active() const { return active_; }
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int local_rank() const { return local_rank_; }  // rank among this node's ranks; picks the GPU

  // Prints "deepinfer generate: rank R failed: MESSAGE" and ends every rank with exit_code
  // (MPI_Abort; launch/exit_code.h exit_code_of gives it, as for one rank). A bad input or option
  // (kExitBadArguments) is usually met by every rank alike: ranks other than 0 first wait
  // kPeerAbortWait for rank 0's abort to end them, so the message is printed once, not once a rank.
  [[noreturn]] void abort_job(const std::string& message, int exit_code) const;
  static constexpr double kPeerAbortWait = 2.0;  // seconds

  // Rank 0 gets every rank's outcome in rank order; other ranks get {}. A collective.
  std::vector<pipeline::JobOutcome> gather_outcomes(const pipeline::JobOutcome& mine) const;

 private:
  bool active_ = false;
  int rank_ = 0;
  int world_size_ = 1;
  int local_rank_ = 0;
};

// Test hook: DEEPINFER_FAIL_RANK=R makes rank R throw at its 3rd lockstep step (read here only).
int injected_failure_rank();

}  // namespace deepinfer::launch
