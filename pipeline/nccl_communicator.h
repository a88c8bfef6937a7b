#pragma once
// The NCCL side of a multi-rank job on CUDA tensors (one process and one GPU per rank): the
// ExpertCommunicator backend of the MoE layers. Built only with DEEPINFER_CUDA=ON.
// Row counts are host values on every rank (a batch's token count), so they travel over MPI
// (MPI_Allgather, a few bytes); the rows themselves go GPU to GPU through NCCL on the current
// CUDA stream, without a host synchronization:
//   all_gather_rows:     one ncclBroadcast per rank (root r sends its n_r rows) in a group,
//                        i.e. an all-gather with unequal counts;
//   reduce_scatter_rows: one ncclReduce per rank (root r receives the sum of its n_r rows)
//                        in a group, i.e. a reduce-scatter with unequal counts.
// Owns: the NCCL communicator (ncclUniqueId from rank 0 over MPI_Bcast). Does not own:
// MPI_Init (launch/mpi_session.h) or choosing the GPU (launch/, by local rank).

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>

#include "model/expert_parallel.h"

namespace deepinfer::pipeline {

// Makes `device` (CUDA) the process's current device, so kernels and streams of this rank go to
// its GPU. A no-op without the CUDA build.
void select_cuda_device(at::Device device);

// Whether this build has the NCCL backend (DEEPINFER_CUDA=ON).
bool nccl_available();
// The NCCL communicator of this rank (MPI initialized, `device` this rank's GPU and the
// current CUDA device). Throws where nccl_available() is false.
std::unique_ptr<model::ExpertCommunicator> make_nccl_communicator(at::Device device);

}  // namespace deepinfer::pipeline
