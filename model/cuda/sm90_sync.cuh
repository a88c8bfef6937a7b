#pragma once
// Hopper (sm_90) synchronization for model/cuda/sparse_attention_sm90.cu and
// sparse_attention_heads.cu: thread-block cluster barriers and stores into another block's shared
// memory, named barriers between warpgroups, warpgroups' register limits, and mbarriers that
// cp.async copies arrive on. Device code only, no torch types.

#include <cstdint>

#include "model/cuda/mma.cuh"

namespace deepinfer::model::cuda::sm90 {

// The cluster of a row's splits (thread block clusters, sm_90; block split s is the cluster's
// rank s): a barrier of every thread of the cluster in two halves (release / acquire: shared-memory
// writes before the arrival are seen after the wait), the address in block `rank` of this block's
// shared memory at `local`, and stores there.
__device__ __forceinline__ void cluster_arrive() { asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory"); }
// The arrival without release, for a barrier that only orders what a fence before it released
// (the mbarriers' initialization: fence.mbarrier_init.release.cluster in init_barrier).
__device__ __forceinline__ void cluster_arrive_relaxed() { asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void cluster_sync() {
  cluster_arrive();
  cluster_wait();
}
__device__ __forceinline__ uint32_t remote_address(const void* local, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(shared_address(local)), "r"(rank));
  return remote;
}
__device__ __forceinline__ void store_remote(uint32_t remote, float x, float y) {
  asm volatile("st.shared::cluster.v2.f32 [%0], {%1, %2};\n" ::"r"(remote), "f"(x), "f"(y) : "memory");
}
__device__ __forceinline__ void store_remote(uint32_t remote, float x, float y, float z, float w) {
  asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(remote), "f"(x), "f"(y), "f"(z), "f"(w) : "memory");
}
// The same stores as st.async: each completes on the receiving block's mbarrier (its address from
// remote_address) with its bytes, so the receiver waits for the bytes, not for a cluster barrier.
__device__ __forceinline__ void store_async(uint32_t remote, float x, float y, uint32_t remote_barrier) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];\n" ::"r"(remote), "f"(x), "f"(y),
               "r"(remote_barrier)
               : "memory");
}
__device__ __forceinline__ void store_async(uint32_t remote, float x, float y, float z, float w, uint32_t remote_barrier) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(remote), "f"(x), "f"(y),
               "f"(z), "f"(w), "r"(remote_barrier)
               : "memory");
}

__device__ __forceinline__ void store_async(uint32_t remote, uint4 v, uint32_t remote_barrier) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(remote), "r"(v.x),
               "r"(v.y), "r"(v.z), "r"(v.w), "r"(remote_barrier)
               : "memory");
}

// An arrival with release at cluster scope on the mbarrier of the cluster's block `rank` at the
// address this block's `local` has (the other block waits on it with wait_barrier_cluster).
__device__ __forceinline__ void arrive_remote(uint64_t* local, uint32_t rank) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(remote_address(local, rank)) : "memory");
}

// Named barriers between the block's two warpgroups (256 threads): bar.arrive by the one that
// hands over, bar.sync by the one that waits.
template <int id>
__device__ __forceinline__ void sync_groups() {
  asm volatile("bar.sync %0, 256;\n" ::"n"(id) : "memory");
}
template <int id>
__device__ __forceinline__ void arrive_groups() {
  asm volatile("bar.arrive %0, 256;\n" ::"n"(id) : "memory");
}
// The same with the barrier's id in a register (ptxas then reserves all 16 barriers).
__device__ __forceinline__ void sync_groups(int id) { asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory"); }
__device__ __forceinline__ void arrive_groups(int id) { asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory"); }

// A warpgroup's register limit (setmaxnreg, executed by the whole warpgroup): lowered by one that
// gives registers up, raised by one that takes them (it waits until the block has them free).
template <int N>
__device__ __forceinline__ void lower_registers() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void raise_registers() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

// A key buffer's mbarrier: its phase completes once each of the `count` threads that copy a tile
// there has seen its copies land (cp.async.mbarrier.arrive.noinc after them).
__device__ __forceinline__ void init_barrier(uint64_t* barrier, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\nfence.mbarrier_init.release.cluster;\n" ::"r"(shared_address(barrier)), "r"(count)
               : "memory");
}
__device__ __forceinline__ void arrive_after_copies(uint64_t* barrier) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(shared_address(barrier)) : "memory");
}
__device__ __forceinline__ void wait_barrier(uint64_t* barrier, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred done;\n waiting:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n @!done bra waiting;\n}\n" ::"r"(
          shared_address(barrier)),
      "r"(parity)
      : "memory");
}
// The same wait with acquire at cluster scope: what the other block of the cluster stored here by
// st.async (store_async, whose complete-tx releases at cluster scope) is seen after it; a wait at
// the default (CTA) scope does not synchronize with another block's release.
__device__ __forceinline__ void wait_barrier_cluster(uint64_t* barrier, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred done;\n waiting:\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n @!done bra "
      "waiting;\n}\n" ::"r"(shared_address(barrier)),
      "r"(parity)
      : "memory");
}

}  // namespace deepinfer::model::cuda::sm90
