#include "model/cuda/sparse_attention_heads.h"

#include <cuda.h>

#include "model/cuda/mma.cuh"
#include "model/cuda/sm90_bulk.cuh"
#include "model/cuda/sm90_sync.cuh"
#include "model/cuda/sparse_attention_keys.cuh"
#include "model/cuda/sparse_attention_sm90.h"
#include "model/cuda/sparse_attention_sm90_layout.cuh"
#include "model/cuda/wgmma.cuh"

// Timing only (tests/gpu/kernel_micro.sh heads): a build with DEEPINFER_HEADS_SKIP set leaves out its
// key copies (1: the quarters' barriers still complete), its scores (2) or its P V (4); the output
// is then wrong. Default builds skip nothing.
#ifndef DEEPINFER_HEADS_SKIP
#define DEEPINFER_HEADS_SKIP 0
#endif
// DEEPINFER_HEADS_OVERLAP=1: warpgroup 0 issues tile t + 1's scores before tile t's P V and runs
// the softmax of t + 1 while the tensor cores add t (P^T and the factors double-buffered); the same
// arithmetic in the same order, so the same bits. A variant until measured (kernel_micro.sh heads).
#ifndef DEEPINFER_HEADS_OVERLAP
#define DEEPINFER_HEADS_OVERLAP 0
#endif
// DEEPINFER_HEADS_COPIERS=2: two copying warpgroups instead of one (8 warps issuing the cp.async, as
// the split kernel's copies have); a variant until measured.
#ifndef DEEPINFER_HEADS_COPIERS
#define DEEPINFER_HEADS_COPIERS 1
#endif

namespace deepinfer::model::cuda {
namespace {

using namespace attention;
using namespace sm90;

constexpr int kHalfHeads = 32;                                             // a block's heads
constexpr int kQTileBytes = kHalfHeads * 128;                              // q's 64-dim column tile: 32 heads x 128 bytes
constexpr int kPTBytes = kHalfHeads * kKeys * 2;                           // P^T: 32 heads x 64 keys (K-major B: keys along a row)
constexpr int kStagePitch = kD * 2 + 16;                                   // an output row staged (distinct banks for a warp's stores)
constexpr int kQuarterBytes = 2 * kColumnTileBytes;                        // a quarter of a key tile: 64 rows x 128 dims
constexpr int kSlots = 11;                                                 // the ring of quarters: one tile computed on, 1.75 in flight
constexpr int kConsumers = 256, kCopiers = 128 * DEEPINFER_HEADS_COPIERS;  // two computing warpgroups, then the copying ones
constexpr int kHeadsThreads = kConsumers + kCopiers;
constexpr int kDone = 4;  // the two warpgroups' named barrier at the end (1: group 0's own; 2, 3, 5, 6: the P buffers')
constexpr int kPBuffers = DEEPINFER_HEADS_OVERLAP ? 2 : 1;  // P^T and the factors: tile t's in buffer t % kPBuffers
static_assert(kHeadsMaxKeys <= 2 * kHeadsThreads, "find_all_rows: two rows a thread");

struct HeadsShared {
  static constexpr int kQ = 0, kRing = kD * kHalfHeads * 2, kP = kRing + kSlots * kQuarterBytes;  // P: [buffer] P^T
  static constexpr int kRows = kP + kPBuffers * kPTBytes;
  static constexpr int kRed = kRows + kHeadsMaxKeys * 8;              // [tile % 2][head][warp] group 0's tile maxima
  static constexpr int kAlpha = kRed + 2 * kHalfHeads * 4 * 4;        // [buffer][head] the earlier tiles' factor, for group 1
  static constexpr int kMax = kAlpha + kPBuffers * kHalfHeads * 4;    // [head] at the end
  static constexpr int kSum = kMax + kHalfHeads * 4;                  // [warp][head] at the end
  static constexpr int kFull = kSum + 4 * kHalfHeads * 4;             // [slot] quarters landed, then [slot] quarters free, then q's
  static constexpr int kBytes = kFull + (2 * kSlots + 1) * 8 + 1024;  // and room to align the base to 1024
  static constexpr int kStage = kRing;                                // the output, after the tiles
};
static_assert(HeadsShared::kStage + kHalfHeads * kStagePitch <= HeadsShared::kP, "the staged output fits the ring");
static_assert(HeadsShared::kBytes <= 227 * 1024, "a block's shared memory fits Hopper's");

// A warpgroup's register limit: the copying ones give registers up, the computing ones take them
// (128 x 56 + 256 x 224, or 256 x 40 + 256 x 208, of the 64K).
constexpr int kCopyRegisters = DEEPINFER_HEADS_COPIERS == 1 ? 56 : 40;
constexpr int kComputeRegisters = DEEPINFER_HEADS_COPIERS == 1 ? 224 : 208;
static_assert(kCopiers * kCopyRegisters + kConsumers * kComputeRegisters <= 65536, "the registers fit");

// Group 0's barrier (its 128 threads).
__device__ __forceinline__ void sync_group0() { asm volatile("bar.sync 1, 128;\n" ::: "memory"); }

// The hand-overs of P buffer b between the two warpgroups, a named barrier each way per buffer:
// "ready" (2, 6) warpgroup 0 arrives once P^T and the factors are written, warpgroup 1 waits;
// "free" (3, 5) warpgroup 1 arrives once its P V of the buffer's tile is done, warpgroup 0 waits
// before writing the buffer again. A barrier only counts arrivals, so an arriving side must never
// be two arrivals ahead on one barrier: warpgroup 0's next arrival on ready b (tile t + kPBuffers)
// comes after its wait on free b, which comes after warpgroup 1's wait on ready b for tile t; and
// warpgroup 1's next arrival on free b comes after its wait on ready b for that next tile, which
// comes after warpgroup 0's wait on free b.
__device__ __forceinline__ int ready_barrier(int t) { return 2 + 4 * (t % kPBuffers); }
__device__ __forceinline__ int free_barrier(int t) { return 3 + 2 * (t % kPBuffers); }

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
    unsigned char* quarter = ring + slot * kQuarterBytes + (chunk / 8) * kColumnTileBytes;
#pragma unroll
    for (int m = 0; m < kCopies && !(DEEPINFER_HEADS_SKIP & 1); ++m) {
      const int r = kRowStep * m + p / 16;
      copy16_async(quarter + swizzled_offset(r, chunk % 8), src[m] != nullptr ? src[m] + dims : fallback, src[m] != nullptr);
    }
    arrive_after_copies(&full[slot]);
  }
  commit_copies();
  wait_copies<0>();  // none in flight when the thread leaves
}

// Column tile c (dims 64 c ..) of tile t's keys in the ring.
__device__ __forceinline__ const unsigned char* column_tile(const unsigned char* ring, int t, int c) {
  return ring + ((4 * t + c / 2) % kSlots) * kQuarterBytes + (c % 2) * kColumnTileBytes;
}

// Waits for quarter q of tile t to land, for the tensor cores' reads.
__device__ __forceinline__ void wait_quarter(uint64_t* full, int t, int q) {
  const int n = 4 * t + q;
  wait_barrier(&full[n % kSlots], (n / kSlots) & 1);
  fence_async_shared();
}

// A warp's release of quarters q0 and q0 + 1 of tile t, its wgmmas on them done.
__device__ __forceinline__ void release_quarters(uint64_t* free, int t, int q0, int lane) {
  __syncwarp();
  if (lane == 0) {
    arrive(&free[(4 * t + q0) % kSlots]);
    arrive(&free[(4 * t + q0 + 1) % kSlots]);
  }
}

// Issues S^T (the tile's 64 keys x 32 heads) += K q^T over the 512 dims, k16 steps in order (the
// caller fences before and commits after).
__device__ __forceinline__ void issue_scores(float (&s)[16], const unsigned char* q_s, const unsigned char* ring, int t) {
#pragma unroll
  for (int step = 0; step < kD / 16 && !(DEEPINFER_HEADS_SKIP & 2); ++step) {
    wgmma_m64n32k16_ss<0>(s, wgmma_descriptor(column_tile(ring, t, step / 4) + (step % 4) * 32, 16, 1024),
                          wgmma_descriptor(q_s + (step / 4) * kQTileBytes + (step % 4) * 32, 16, 1024));
  }
}

// Waits for tile t's four quarters and zeroes s, ready for issue_scores (a wait between the
// wgmmas would make ptxas serialize them).
__device__ __forceinline__ void prepare_scores(float (&s)[16], uint64_t* full, int t) {
#pragma unroll
  for (int q = 0; q < 4; ++q) wait_quarter(full, t, q);
#pragma unroll
  for (int i = 0; i < 16; ++i) s[i] = 0.0f;
  wgmma_settle(s);
}

// S^T of tile t, waited for.
__device__ __forceinline__ void score_keys(float (&s)[16], const unsigned char* q_s, const unsigned char* ring, uint64_t* full, int t) {
  prepare_scores(s, full, t);
  wgmma_fence();
  issue_scores(s, q_s, ring, t);
  wgmma_commit();
  wgmma_wait<0>();
  wgmma_settle(s);
}

// What one thread of group 0 holds: keys (rows of S^T) k0 = 16 warp + lane / 4 and k0 + 8, heads
// (columns) 8 j + 2 quad + e as head index 2 j + e (of 8), in s[4 j + e] (key k0) and s[4 j + 2 + e]
// (k0 + 8); either group holds the same heads for dims 64 b + 16 warp + lane / 4 (+ 8) of acc[b].
struct HeadsSoftmax {
  float max[8], sum[8];  // sum: this thread's keys only, summed over the group at the end
};
__device__ __forceinline__ int head_of(int h, int quad) { return 8 * (h / 2) + 2 * quad + h % 2; }

// Group 0's online softmax step over one tile: masked keys out, each head's max over the group's
// four warps (red: this tile's [head][warp] slots), the factor of the earlier tiles into alpha,
// P^T as bfloat16 into p_s.
__device__ __forceinline__ void softmax_keys(float (&s)[16], bool valid0, bool valid1, float scale, HeadsSoftmax& run, float* red,
                                             unsigned char* p_s, float (&alpha)[8], int warp, int lane) {
  const int quad = lane % 4, k0 = 16 * warp + lane / 4;
  float m[8];
#pragma unroll
  for (int h = 0; h < 8; ++h) {
    const int i = 4 * (h / 2) + h % 2;
    s[i] = valid0 ? s[i] * scale : -INFINITY;
    s[i + 2] = valid1 ? s[i + 2] * scale : -INFINITY;
    m[h] = fmaxf(s[i], s[i + 2]);
    m[h] = fmaxf(m[h], __shfl_xor_sync(0xffffffffu, m[h], 4));
    m[h] = fmaxf(m[h], __shfl_xor_sync(0xffffffffu, m[h], 8));
    m[h] = fmaxf(m[h], __shfl_xor_sync(0xffffffffu, m[h], 16));
    if (lane < 4) red[head_of(h, quad) * 4 + warp] = m[h];
  }
  sync_group0();
#pragma unroll
  for (int h = 0; h < 8; ++h) {
    const int c = head_of(h, quad), i = 4 * (h / 2) + h % 2;
    const float4 w = *reinterpret_cast<const float4*>(red + c * 4);
    const float next = fmaxf(run.max[h], fmaxf(fmaxf(w.x, w.y), fmaxf(w.z, w.w)));
    const float base = next == -INFINITY ? 0.0f : next;  // no valid key yet: every p is 0
    alpha[h] = exp2f(run.max[h] - base);
    run.max[h] = next;
    const float p0 = exp2f(s[i] - base), p1 = exp2f(s[i + 2] - base);
    run.sum[h] = run.sum[h] * alpha[h] + (p0 + p1);
    *reinterpret_cast<__nv_bfloat16*>(p_s + swizzled_offset(c, k0 / 8) + (k0 % 8) * 2) = __float2bfloat16_rn(p0);
    *reinterpret_cast<__nv_bfloat16*>(p_s + swizzled_offset(c, k0 / 8 + 1) + (k0 % 8) * 2) = __float2bfloat16_rn(p1);
  }
}

// The earlier tiles' factor on the accumulators, made before the fence (else ptxas injects a wait
// at each wgmma).
__device__ __forceinline__ void rescale(float (&acc)[4][16], const float (&alpha)[8]) {
#pragma unroll
  for (int b = 0; b < 4; ++b) {
#pragma unroll
    for (int j = 0; j < 16; ++j) acc[b][j] *= alpha[2 * (j / 4) + j % 2];
    wgmma_settle(acc[b]);
  }
}

// Issues acc[b] (dims 64 (first + b) .. + 63 x 32 heads) += V^T P^T over tile t's 64 keys, the
// group's four column tiles `first` .. (the caller fences before and commits after).
__device__ __forceinline__ void issue_values(float (&acc)[4][16], const unsigned char* p_s, const unsigned char* ring, int t, int first) {
#pragma unroll
  for (int b = 0; b < 4 && !(DEEPINFER_HEADS_SKIP & 4); ++b) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      wgmma_m64n32k16_ss<1>(acc[b], wgmma_descriptor(column_tile(ring, t, first + b) + k * 2048, kColumnTileBytes, 1024),
                            wgmma_descriptor(p_s + k * 32, 16, 1024));
    }
  }
}

__device__ __forceinline__ void settle_values(float (&acc)[4][16]) {
#pragma unroll
  for (int b = 0; b < 4; ++b) wgmma_settle(acc[b]);
}

// acc = acc alpha + V^T P^T of tile t (issue_values), waited for.
__device__ __forceinline__ void add_values(float (&acc)[4][16], const float (&alpha)[8], const unsigned char* p_s,
                                           const unsigned char* ring, int t, int first) {
  rescale(acc, alpha);
  wgmma_fence();
  issue_values(acc, p_s, ring, t, first);
  wgmma_commit();
  wgmma_wait<0>();
  settle_values(acc);
}

// What warpgroup 0's loops share: shared memory, the row's keys and the softmax's constants.
struct Group0 {
  unsigned char* shared;
  const __nv_bfloat16* const* rows_s;
  uint64_t* full;
  uint64_t* free;
  float scale;
  int warp, lane;

  __device__ unsigned char* p_s(int t) const { return shared + HeadsShared::kP + (t % kPBuffers) * kPTBytes; }
  __device__ float* alpha_s(int t) const { return reinterpret_cast<float*>(shared + HeadsShared::kAlpha) + (t % kPBuffers) * kHalfHeads; }

  // Tile t's softmax from its scores s: P^T and the factors published for warpgroup 1.
  __device__ __forceinline__ void softmax(float (&s)[16], int t, HeadsSoftmax& run, float (&alpha)[8]) const {
    const int k0 = 16 * warp + lane / 4, quad = lane % 4;
    softmax_keys(s, rows_s[t * kKeys + k0] != nullptr, rows_s[t * kKeys + k0 + 8] != nullptr, scale, run,
                 reinterpret_cast<float*>(shared + HeadsShared::kRed) + (t % 2) * kHalfHeads * 4, p_s(t), alpha, warp, lane);
    if (lane < 4) {
#pragma unroll
      for (int h = 0; h < 8; ++h) alpha_s(t)[head_of(h, quad)] = alpha[h];
    }
    fence_async_shared();  // P^T's writes, for the tensor cores' reads
    arrive_groups(ready_barrier(t));
    sync_group0();  // every warp's keys of P^T written: each warp's wgmmas read all four warps' keys
  }

  // One tile after the other: scores, softmax, P V.
  __device__ __forceinline__ void run_tiles(float (&acc)[4][16], HeadsSoftmax& run, int tiles) const {
    for (int t = 0; t < tiles; ++t) {
      float s[16], alpha[8];
      score_keys(s, shared + HeadsShared::kQ, ring(), full, t);
      if (t >= kPBuffers) sync_groups(free_barrier(t));  // warpgroup 1 is done with tile t - kPBuffers's P^T and factors
      softmax(s, t, run, alpha);
      add_values(acc, alpha, p_s(t), ring(), t, 0);
      release_quarters(free, t, 0, lane);
    }
  }

  // Tile t + 1's scores issued before tile t's P V; its softmax runs while the tensor cores add t.
  __device__ __forceinline__ void run_tiles_overlapped(float (&acc)[4][16], HeadsSoftmax& run, int tiles) const {
    if (tiles == 0) return;
    float s[16], alpha[8];
    score_keys(s, shared + HeadsShared::kQ, ring(), full, 0);
    softmax(s, 0, run, alpha);
    for (int t = 0; t + 1 < tiles; ++t) {
      rescale(acc, alpha);
      prepare_scores(s, full, t + 1);
      wgmma_fence();
      issue_scores(s, shared + HeadsShared::kQ, ring(), t + 1);
      wgmma_commit();
      issue_values(acc, p_s(t), ring(), t, 0);
      wgmma_commit();
      wgmma_wait<1>();  // the scores
      wgmma_settle(s);
      if (t + 1 >= kPBuffers) sync_groups(free_barrier(t + 1));  // warpgroup 1 is done with tile t - 1's P^T and factors
      softmax(s, t + 1, run, alpha);
      wgmma_wait<0>();  // P V
      settle_values(acc);
      release_quarters(free, t, 0, lane);
    }
    add_values(acc, alpha, p_s(tiles - 1), ring(), tiles - 1, 0);
    release_quarters(free, tiles - 1, 0, lane);
  }

  __device__ unsigned char* ring() const { return shared + HeadsShared::kRing; }
};

// Warpgroup 1: P V of each tile for dims 256 .. 511 with warpgroup 0's P^T and factors.
// Its own wait on its two quarters (already landed: warpgroup 0 scored them) orders their cp.async
// writes before its tensor cores' reads in its own threads, not only through warpgroup 0's fence.
__device__ __forceinline__ void group1_tiles(float (&acc)[4][16], unsigned char* shared, uint64_t* full, uint64_t* free, int tiles,
                                             int lane) {
  const int quad = lane % 4;
  for (int t = 0; t < tiles; ++t) {
    float alpha[8];
    sync_groups(ready_barrier(t));
    wait_quarter(full, t, 2);
    wait_quarter(full, t, 3);
    const float* alpha_s = reinterpret_cast<const float*>(shared + HeadsShared::kAlpha) + (t % kPBuffers) * kHalfHeads;
#pragma unroll
    for (int h = 0; h < 8; ++h) alpha[h] = alpha_s[head_of(h, quad)];
    add_values(acc, alpha, shared + HeadsShared::kP + (t % kPBuffers) * kPTBytes, shared + HeadsShared::kRing, t, 4);
    if (t + kPBuffers < tiles) arrive_groups(free_barrier(t));  // warpgroup 0 may write this buffer again
    release_quarters(free, t, 2, lane);
  }
}

__global__ void __launch_bounds__(kHeadsThreads, 1) heads_kernel(const SparseAttentionArgs a, const __grid_constant__ CUtensorMap q_map) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char shared_raw[];
  unsigned char* shared = shared_raw + ((1024 - (shared_address(shared_raw) & 1023)) & 1023);
  unsigned char* ring = shared + HeadsShared::kRing;
  const __nv_bfloat16** rows_s = reinterpret_cast<const __nv_bfloat16**>(shared + HeadsShared::kRows);
  uint64_t* full = reinterpret_cast<uint64_t*>(shared + HeadsShared::kFull);  // [slot]
  uint64_t* free = full + kSlots;                                             // [slot], then q's
  wait_for_previous_grid();  // a programmatic dependent launch: nothing is read before the kernel before it is done

  const QueryKeys k = query_keys(a, a.first_query + blockIdx.x);
  const int num_keys = static_cast<int>(k.window_keys + k.compressed_keys);  // at most kHeadsMaxKeys (the launch checks the call)
  const int tiles = (num_keys + kKeys - 1) / kKeys;
  const int64_t row = a.query_rows[k.query];
  const int first_head = kHalfHeads * static_cast<int>(blockIdx.y);
  if (threadIdx.x == 0) {
    for (int i = 0; i < kSlots; ++i) {
      init_barrier(&full[i], kCopiers);
      init_barrier(&free[i], 4);
    }
    init_barrier(&free[kSlots], 1);
    load_q_half(shared + HeadsShared::kQ, &q_map, row, first_head, &free[kSlots]);
  }
  find_all_rows(rows_s, a, k, num_keys);
  __syncthreads();  // the rows and the barriers
  const int group = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, quad = lane % 4;
  if (group >= 2) {  // a warpgroup's condition: one of threadIdx.x >= kConsumers made ptxas serialize the wgmmas (C7520)
    lower_registers<kCopyRegisters>();
    copy_quarters(ring, rows_s, a.q, 4 * tiles, full, free, threadIdx.x - kConsumers);
    return;
  }
  raise_registers<kComputeRegisters>();

  HeadsSoftmax run;
#pragma unroll
  for (int h = 0; h < 8; ++h) run.max[h] = -INFINITY, run.sum[h] = 0.0f;
  float acc[4][16];  // the group's dims: 256 group ..
#pragma unroll
  for (int b = 0; b < 4; ++b) {
#pragma unroll
    for (int i = 0; i < 16; ++i) acc[b][i] = 0.0f;
  }
  wait_barrier(&free[kSlots], 0);  // q, by every thread: a condition here makes ptxas serialize the wgmmas (C7520)
  if (group == 0) {
    const Group0 g{shared, rows_s, full, free, a.scale * kLog2e, warp, lane};
    if (DEEPINFER_HEADS_OVERLAP)
      g.run_tiles_overlapped(acc, run, tiles);
    else
      g.run_tiles(acc, run, tiles);
  } else {
    group1_tiles(acc, shared, full, free, tiles, lane);
  }
  allow_next_grid();  // the next kernel may launch; a dependent one waits for this grid before it reads

  // Group 0's sums over its threads' keys, then each group's dims with the sink.
  float* max_s = reinterpret_cast<float*>(shared + HeadsShared::kMax);
  float* sum_s = reinterpret_cast<float*>(shared + HeadsShared::kSum);
  if (group == 0) {
#pragma unroll
    for (int h = 0; h < 8; ++h) {
      float l = run.sum[h];
      l += __shfl_xor_sync(0xffffffffu, l, 4);
      l += __shfl_xor_sync(0xffffffffu, l, 8);
      l += __shfl_xor_sync(0xffffffffu, l, 16);
      if (lane < 4) sum_s[warp * kHalfHeads + head_of(h, quad)] = l;
      if (lane < 4 && warp == 0) max_s[head_of(h, quad)] = run.max[h];
    }
  }
  sync_groups<kDone>();  // the sums are in, every tile is done: the ring takes the staged output
  unsigned char* stage = shared + HeadsShared::kStage;
#pragma unroll
  for (int h = 0; h < 8; ++h) {
    const int c = head_of(h, quad), head = first_head + c;
    const float sink = head < a.heads ? a.sink[head] * kLog2e : 0.0f;
    const float m_row = max_s[c], l_row = ((sum_s[c] + sum_s[kHalfHeads + c]) + sum_s[2 * kHalfHeads + c]) + sum_s[3 * kHalfHeads + c];
    const float m = fmaxf(m_row, sink);
    const float kept = exp2f(m_row - m);
    const float factor = kept / (l_row * kept + exp2f(sink - m));
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      const int i = 4 * (h / 2) + h % 2, d = 256 * group + 64 * b + 16 * warp + lane / 4;
      *reinterpret_cast<__nv_bfloat16*>(stage + c * kStagePitch + d * 2) = __float2bfloat16_rn(acc[b][i] * factor);
      *reinterpret_cast<__nv_bfloat16*>(stage + c * kStagePitch + (d + 8) * 2) = __float2bfloat16_rn(acc[b][i + 2] * factor);
    }
  }
  sync_groups<kDone>();  // every value is staged
  const int heads = min(kHalfHeads, a.heads - first_head);
  __nv_bfloat16* out = a.out + (row * a.heads + first_head) * kD;
  for (int i = threadIdx.x; i < heads * (kD / 8); i += kConsumers) {
    const int h = i / (kD / 8), c = i % (kD / 8);
    *reinterpret_cast<uint4*>(out + h * kD + c * 8) = *reinterpret_cast<const uint4*>(stage + h * kStagePitch + c * 16);
  }
#else
  __trap();  // built without sm_90a: sm90_heads_attention_supported() keeps this from running
#endif
}

}  // namespace

bool sm90_heads_attention_supported(const SparseAttentionArgs& a) {
  const bool fixed_keys = a.ratio == 0 || a.picks != nullptr;  // CSA or the window alone
  const int64_t keys = a.window + (a.ratio == 0 ? 0 : a.num_picks);
  return fixed_keys && keys <= kHeadsMaxKeys && sm90_attention_supported(a);
}

cudaError_t sm90_heads_attention(const SparseAttentionArgs& args, cudaStream_t stream) {
  SparseAttentionArgs a = args;
  a.first_query = 0;
  // The warpgroups' setmaxnreg moves registers within what the launch gives the block: if ptxas
  // gave the kernel fewer, raising them would wait forever, so refuse the launch instead.
  static const cudaError_t registers = [] {
    cudaFuncAttributes attributes;
    if (const cudaError_t e = cudaFuncGetAttributes(&attributes, heads_kernel); e != cudaSuccess) return e;
    const bool enough = attributes.numRegs * kHeadsThreads >= kCopiers * kCopyRegisters + kConsumers * kComputeRegisters;
    return enough ? cudaSuccess : cudaErrorInvalidConfiguration;
  }();
  if (registers != cudaSuccess) return registers;
  CUtensorMap q_map;
  if (const cudaError_t made = sm90_q_tensor_map(a, kHalfHeads, q_map); made != cudaSuccess) return made;
  const cudaError_t configured = cudaFuncSetAttribute(heads_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, HeadsShared::kBytes);
  if (configured != cudaSuccess) return configured;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(a.num_seqs * a.len), 2);
  config.blockDim = dim3(kHeadsThreads);
  config.dynamicSmemBytes = HeadsShared::kBytes;
  config.stream = stream;
  cudaLaunchAttribute attribute;
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, heads_kernel, a, q_map);
}

}  // namespace deepinfer::model::cuda
