#pragma once
// Hopper (sm_90) bulk copies and the mbarriers they complete on, and programmatic dependent
// launch: what the FP4 expert GEMMs (moe_fp4_gemm.cu) use to keep their shared-memory ring full
// and to start a kernel's prologue while the previous kernel of the stream finishes. Device code
// only, no torch types. sm90_sync.cuh has the barrier's init and wait.

#include <cstdint>

#include "model/cuda/mma.cuh"

namespace deepinfer::model::cuda::sm90 {

// The calling thread's arrival on `barrier`, announcing `bytes` more that bulk copies will bring.
__device__ __forceinline__ void arrive_expect_bytes(uint64_t* barrier, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(barrier)), "r"(bytes) : "memory");
}

// A plain arrival (a consumer handing a buffer back).
__device__ __forceinline__ void arrive(uint64_t* barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(barrier)) : "memory");
}

// `bytes` (a multiple of 16, both addresses 16-byte aligned) global -> shared by the copy
// engine; their arrival completes that many bytes of `barrier`'s transaction count.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, uint32_t bytes, uint64_t* barrier) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(shared_address(dst)),
               "l"(src), "r"(bytes), "r"(shared_address(barrier))
               : "memory");
}

// Programmatic dependent launch (a kernel launched with the programmatic stream serialization
// attribute): wait_for_previous_grid() blocks until the previous kernel of the stream has
// finished and its writes are visible; allow_next_grid() lets the next such kernel start its
// blocks (its prologue) before this one ends. Both are no-ops for a plain launch.
__device__ __forceinline__ void wait_for_previous_grid() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
__device__ __forceinline__ void allow_next_grid() { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }

}  // namespace deepinfer::model::cuda::sm90
