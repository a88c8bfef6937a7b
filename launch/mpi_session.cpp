#include "launch/mpi_session.h"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "launch/exit_code.h"
#include "pipeline/mpi_communicator.h"

namespace deepinfer::launch {
namespace {

bool launched_by_mpirun() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (std::getenv(name)) return true;
  return false;
}

std::string encode(const pipeline::JobOutcome& o) {
  std::ostringstream out;
  out.precision(17);
  out << o.interrupted << ' ' << o.was_complete << ' ' << o.records << ' ' << o.requests_run << ' ' << o.prompt_tokens << ' '
      << o.output_tokens << ' ' << o.steps << ' ' << o.preemptions << ' ' << o.elapsed_s << ' ' << o.mean_ttft_ms << ' ' << o.mean_tpot_ms;
  for (const auto& reason : o.finish_reasons) out << ' ' << reason;  // "name=N", no spaces
  return out.str();
}

pipeline::JobOutcome decode(const std::string& text) {
  std::istringstream in(text);
  pipeline::JobOutcome o;
  in >> o.interrupted >> o.was_complete >> o.records >> o.requests_run >> o.prompt_tokens >> o.output_tokens >> o.steps >> o.preemptions >>
      o.elapsed_s >> o.mean_ttft_ms >> o.mean_tpot_ms;
  if (!in) throw std::runtime_error("cannot decode a rank's outcome: '" + text + "'");
  for (std::string reason; in >> reason;) o.finish_reasons.push_back(reason);
  return o;
}

}  // namespace

MpiSession::MpiSession() {
  if (!launched_by_mpirun()) return;
  if (MPI_Init(nullptr, nullptr) != MPI_SUCCESS) throw std::runtime_error("MPI_Init failed");
  active_ = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
  // The rank among those on this node: picks the GPU (one per rank).
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local_rank_);
  MPI_Comm_free(&node);
}

MpiSession::~MpiSession() {
  if (active_) MPI_Finalize();
}

void MpiSession::abort_job(const std::string& message, int exit_code) const {
  if (active_ && rank_ != 0 && exit_code == kExitBadArguments)
    std::this_thread::sleep_for(std::chrono::duration<double>(kPeerAbortWait));  // rank 0's abort may end this rank first
  std::fprintf(stderr, "deepinfer generate: rank %d failed: %s\n", rank_, message.c_str());
  std::fflush(stderr);
  if (active_) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

std::vector<pipeline::JobOutcome> MpiSession::gather_outcomes(const pipeline::JobOutcome& mine) const {
  if (!active_) return {mine};
  std::vector<pipeline::JobOutcome> all;
  for (const auto& text : pipeline::mpi_gather_strings(encode(mine))) all.push_back(decode(text));
  return all;
}

int injected_failure_rank() {
  const char* value = std::getenv("DEEPINFER_FAIL_RANK");
  return value && *value ? std::atoi(value) : -1;
}

}  // namespace deepinfer::launch
