#pragma once
// The head-split attention kernel's (model/cuda/sparse_attention_heads.cu) copying side: its
// block's shape, q's half by the tensor-memory accelerator, the row's key rows looked up, and the
// ring of quarter tiles that the copying warpgroups fill by cp.async and the computing ones
// release. Internal: included by that file alone. Device code only, no torch types.

#include <cuda.h>

#include "model/cuda/mma.cuh"
#include "model/cuda/sm90_bulk.cuh"
#include "model/cuda/sm90_sync.cuh"
#include "model/cuda/sm90_trace.cuh"
#include "model/cuda/sparse_attention_heads.h"
#include "model/cuda/sparse_attention_keys.cuh"
#include "model/cuda/sparse_attention_sm90_layout.cuh"
#include "model/cuda/wgmma.cuh"

// Timing only (tests/gpu/kernel_micro.sh heads): a build with DEEPINFER_HEADS_SKIP set leaves out its
// key copies (1: the quarters' barriers still complete), its scores (2) or its P V (4); the output
// is then wrong. Default builds skip nothing. Also for timing (sparse_attention_heads.cu): 8 leaves
// out the softmax's maxima across group 0's warps (each warp its own), 16 its stores of P^T.
#ifndef DEEPINFER_HEADS_SKIP
#define DEEPINFER_HEADS_SKIP 0
#endif
// DEEPINFER_HEADS_COPIERS=2: two copying warpgroups instead of one (8 warps issuing the cp.async, as
// the split kernel's copies have); a variant until measured.
#ifndef DEEPINFER_HEADS_COPIERS
#define DEEPINFER_HEADS_COPIERS 1
#endif
// DEEPINFER_HEADS_FENCE_ONCE=1: one proxy fence after all of a tile's quarter waits instead of one
// after each (the same order: every awaited write before the tensor cores' reads); a variant until
// measured.
#ifndef DEEPINFER_HEADS_FENCE_ONCE
#define DEEPINFER_HEADS_FENCE_ONCE 0
#endif

namespace deepinfer::model::cuda::heads {

using namespace attention;
using namespace sm90;

constexpr int kHalfHeads = 32;                                             // a block's heads
constexpr int kQTileBytes = kHalfHeads * 128;                              // q's 64-dim column tile: 32 heads x 128 bytes
constexpr int kQuarterBytes = 2 * kColumnTileBytes;                        // a quarter of a key tile: 64 rows x 128 dims
constexpr int kSlots = 11;                                                 // the ring of quarters: one tile computed on, 1.75 in flight
constexpr int kConsumers = 256, kCopiers = 128 * DEEPINFER_HEADS_COPIERS;  // two computing warpgroups, then the copying ones
constexpr int kHeadsThreads = kConsumers + kCopiers;
static_assert(kHeadsMaxKeys <= 2 * kHeadsThreads, "find_all_rows: two rows a thread");

// A tile's trace point (DEEPINFER_SM90_TRACE; tiles past 10 unstamped).
__device__ __forceinline__ void trace_tile(int t, int i) {
  if (t < 11) trace(4 + 5 * t + i);
}

// q's 32 heads of the block (`first_head` on) by the tensor-memory accelerator, eight 64-dim
// column tiles of 4 KB, completing on `barrier`.
__device__ __forceinline__ void load_q_half(unsigned char* q_s, const CUtensorMap* q_map, int64_t row, int first_head, uint64_t* barrier) {
  arrive_expect_bytes(barrier, kD * kHalfHeads * 2);
#pragma unroll
  for (int c = 0; c < kD / 64; ++c) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(
                     shared_address(q_s + c * kQTileBytes)),
                 "l"(reinterpret_cast<uint64_t>(q_map)), "r"(64 * c), "r"(first_head), "r"(static_cast<int>(row)),
                 "r"(shared_address(barrier))
                 : "memory");
  }
}

// Every key row of the row into rows_s (null past its keys), by all threads, two a thread at
// most, every lookup out before the first store.
__device__ __forceinline__ void find_all_rows(const __nv_bfloat16** rows_s, const SparseAttentionArgs& a, const QueryKeys& k,
                                              int num_keys) {
  const __nv_bfloat16* found[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int j = threadIdx.x + i * kHeadsThreads;
    found[i] = j < num_keys ? key_row<kD>(a, k, j) : nullptr;
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int j = threadIdx.x + i * kHeadsThreads;
    if (j < kHeadsMaxKeys) rows_s[j] = found[i];
  }
}

// The copying warpgroups: quarter n (tile n / 4, dims 128 (n % 4) ..) into ring slot n % kSlots
// once the slot's previous quarter is released, thread p (of kCopiers) the 16-byte chunks p % 16 of
// rows p / 16 + (kCopiers / 16) m.
__device__ __forceinline__ void copy_quarters(unsigned char* ring, const __nv_bfloat16* const* rows_s, const __nv_bfloat16* fallback,
                                              int quarters, uint64_t* full, uint64_t* free, int p) {
  constexpr int kRowStep = kCopiers / 16, kCopies = kKeys / kRowStep;  // rows apart, copies a thread a quarter
  const int chunk = p % 16;
  for (int n = 0; n < quarters; ++n) {
    const int slot = n % kSlots, use = n / kSlots, t = n / 4, dims = 128 * (n % 4) + 8 * chunk;
    const __nv_bfloat16* src[kCopies];  // read before the copies: each copy's asm may write memory
#pragma unroll
    for (int m = 0; m < kCopies; ++m) src[m] = rows_s[t * kKeys + kRowStep * m + p / 16];
    if (use > 0) wait_barrier(&free[slot], (use - 1) & 1);
    if (n % 4 == 0) trace_tile(t, 0);
    unsigned char* quarter = ring + slot * kQuarterBytes + (chunk / 8) * kColumnTileBytes;
#pragma unroll
    for (int m = 0; m < kCopies && !(DEEPINFER_HEADS_SKIP & 1); ++m) {
      const int r = kRowStep * m + p / 16;
      copy16_async(quarter + swizzled_offset(r, chunk % 8), src[m] != nullptr ? src[m] + dims : fallback, src[m] != nullptr);
    }
    arrive_after_copies(&full[slot]);
    if (n % 4 == 3) trace_tile(t, 1);
  }
  commit_copies();
  wait_copies<0>();  // none in flight when the thread leaves
}

// Column tile c (dims 64 c ..) of tile t's keys in the ring.
__device__ __forceinline__ const unsigned char* column_tile(const unsigned char* ring, int t, int c) {
  return ring + ((4 * t + c / 2) % kSlots) * kQuarterBytes + (c % 2) * kColumnTileBytes;
}

// Waits for quarter q of tile t to land, for the tensor cores' reads (with DEEPINFER_HEADS_FENCE_ONCE
// the caller fences after its last wait).
__device__ __forceinline__ void wait_quarter(uint64_t* full, int t, int q) {
  const int n = 4 * t + q;
  wait_barrier(&full[n % kSlots], (n / kSlots) & 1);
  if (!DEEPINFER_HEADS_FENCE_ONCE) fence_async_shared();
}

// A warp's release of quarters q0 and q0 + 1 of tile t, its wgmmas on them done.
__device__ __forceinline__ void release_quarters(uint64_t* free, int t, int q0, int lane) {
  __syncwarp();
  if (lane == 0) {
    arrive(&free[(4 * t + q0) % kSlots]);
    arrive(&free[(4 * t + q0 + 1) % kSlots]);
  }
}

}  // namespace deepinfer::model::cuda::heads
