#include "model/cuda/sparse_attention_sm90.h"

#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <vector>

#include "model/cuda/mma.cuh"
#include "model/cuda/sm90_bulk.cuh"
#include "model/cuda/sm90_sync.cuh"
#include "model/cuda/sm90_trace.cuh"
#include "model/cuda/sparse_attention_keys.cuh"
#include "model/cuda/sparse_attention_sm90_layout.cuh"
#include "model/cuda/sparse_attention_sm90_lookup.cuh"
#include "model/cuda/sparse_attention_sm90_merge.cuh"
#include "model/cuda/wgmma.cuh"
#include "model/cuda/wgmma_ss.cuh"

namespace deepinfer::model::cuda {
namespace {

using namespace attention;
using namespace sm90;

constexpr int kPReady = 1, kPFree = 2, kKeysFree = 3;  // the named barriers (sm90_sync.cuh)

// A stage: the keys scored, softmaxed and added as one, in a buffer of its own. The 128 KB of key
// space hold two stages of 64 keys or four of 32 (three then in flight while one is worked on).
#ifndef DEEPINFER_SM90_STAGE_KEYS
#define DEEPINFER_SM90_STAGE_KEYS 64
#endif
constexpr int kStageKeys = DEEPINFER_SM90_STAGE_KEYS;
static_assert(kStageKeys == 32 || kStageKeys == 64, "stages of 32 or 64 keys");
constexpr int kStages = 2 * kKeys / kStageKeys;     // key buffers
constexpr int kStageBytes = kStageKeys * kD * 2;    // a buffer: 8 swizzled column tiles of kStageKeys rows x 64 columns
constexpr int kStageColumnBytes = kStageBytes / 8;  // q's column tiles stay kColumnTileBytes (64 heads)
constexpr int kStrips = kStageKeys / 8;             // 8-row strips a stage, one warp's copies each
// The mbarriers in Shared::kFull: the key buffers', then q's, the pair's partials' and the other split's "q is free".
constexpr int kQBarrier = kStages, kReceivedBarrier = kStages + 1, kQFreeBarrier = kStages + 2;
static_assert(kQFreeBarrier < Shared::kBarriers, "room for the mbarriers");

// The phase of stage t's buffer mbarrier (t > 0): buffer b > 0's n-th use is stage b + n kStages;
// buffer 0's first (stage 0) is waited for as a group of copies.
__device__ __forceinline__ uint32_t stage_parity(int t) { return (t / kStages - (t % kStages == 0 ? 1 : 0)) & 1; }

// Strip `strip` of a stage, rows 8 strip .. 8 strip + 7 of 512 bfloat16, into its swizzled buffer,
// half a row per copy: row r from rows[r] (null: zeros, the readable `fallback` standing in for
// the address). One warp's copies.
__device__ __forceinline__ void copy_strip(unsigned char* tile, const __nv_bfloat16* const* rows, const __nv_bfloat16* fallback, int strip,
                                           int lane) {
  const __nv_bfloat16* src[8];  // read before the copies: each copy's asm may write memory, so none could be read between them
#pragma unroll
  for (int i = 0; i < 8; ++i) src[i] = rows[8 * strip + i];
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int r = j / 2, c = (j % 2) * 32 + lane;
    copy16_async(tile + (c / 8) * kStageColumnBytes + swizzled_offset(8 * strip + r, c % 8), src[r] != nullptr ? src[r] + c * 8 : fallback,
                 src[r] != nullptr);
  }
}

// The row's q by the tensor-memory accelerator: q_map views q as [rows][heads][512] bfloat16 with
// boxes of 64 dims x 64 heads, 128-byte swizzled (the column tiles' layout, swizzled_offset()), heads
// past a.heads filled with zeros; the eight boxes complete on `barrier`.
__device__ __forceinline__ void load_q_tiles(unsigned char* q_s, const CUtensorMap* q_map, int64_t row, uint64_t* barrier) {
  arrive_expect_bytes(barrier, kTileBytes);
#pragma unroll
  for (int c = 0; c < kD / 64; ++c) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(
                     shared_address(q_s + c * kColumnTileBytes)),
                 "l"(reinterpret_cast<uint64_t>(q_map)), "r"(64 * c), "r"(0), "r"(static_cast<int>(row)), "r"(shared_address(barrier))
                 : "memory");
  }
}

// SparseAttentionArgs::early_inputs: q goes out before the kernel waits for the launch before it
// (thread 0, onto q's mbarrier, set up here), reading only q, query_rows, start and slots, and the
// split's first stage of window rows is prefetched into the L2 (one row a thread; an L2 prefetch
// reads the point of coherence, so rows the launch before may still write are no hazard: their
// copies come after the wait). A block that will return at once (past its row's splits, no
// cluster) loads nothing. (A first stage of window keys copied into shared memory early was slower
// on every shape: docs/kernel-notes.md, twenty-eighth session.)
template <bool kCluster>
__device__ __forceinline__ void load_early_inputs(const SparseAttentionArgs& a, unsigned char* shared, const CUtensorMap* q_map) {
  const QueryKeys k = query_keys(a, a.first_query + blockIdx.x);
  if (!kCluster && blockIdx.y >= splits_of(k.window_keys + k.compressed_keys)) return;
  if (threadIdx.x == 0) {
    uint64_t* q_barrier = reinterpret_cast<uint64_t*>(shared + Shared::kFull) + kQBarrier;
    init_barrier(q_barrier, 1);
    load_q_tiles(shared + Shared::kQ, q_map, a.query_rows[k.query], q_barrier);
  }
  const int64_t num_keys = k.window_keys + k.compressed_keys, per_split = split_keys_of(num_keys), j = threadIdx.x;
  if (blockIdx.y < splits_of(num_keys) && j < kStageKeys && j < per_split && blockIdx.y * per_split + j < k.window_keys)
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(key_row<kD>(a, k, blockIdx.y * per_split + j)), "r"(kD * 2)
                 : "memory");
}

// Scores of the 64 heads and a stage's keys (group 0): s = q k^T over the 512 dims, k16 steps in order.
template <int N>  // kStageKeys / 2 scores a thread
__device__ __forceinline__ void score_tile(float (&s)[N], const unsigned char* q_s, const unsigned char* k_s) {
#pragma unroll
  for (int i = 0; i < N; ++i) s[i] = 0.0f;
  wgmma_fence();
#pragma unroll
  for (int step = 0; step < (kSkip & 2 ? 0 : kD / 16); ++step) {
    const uint64_t q = wgmma_descriptor(q_s + (step / 4) * kColumnTileBytes + (step % 4) * 32, 16, 1024);
    const uint64_t k = wgmma_descriptor(k_s + (step / 4) * kStageColumnBytes + (step % 4) * 32, 16, 1024);
    if constexpr (N == 32) {
      wgmma_m64n64k16_ss(s, q, k);
    } else {
      wgmma_m64n32k16_ss<0>(s, q, k);
    }
  }
  wgmma_commit();
  wgmma_wait<0>();
  wgmma_settle(s);
}

// The running softmax of this thread's two heads (group 0), in log2 units.
struct RunningSoftmax {
  float max[2] = {-INFINITY, -INFINITY};
  float sum[2] = {0.0f, 0.0f};
};

// Group 0's online softmax step over one stage's scores (heads r0, r1, keys 8 j + 2 quad + {0, 1}):
// missing keys masked, the running max and sum updated, the probabilities as bfloat16 into pa (the
// A operand of this group's P V, k16 step t: keys 16 t ..) and p_s (the other group's); alpha, the
// factor of the earlier tiles, out.
__device__ __forceinline__ void softmax_tile(float (&s)[kStageKeys / 2], const __nv_bfloat16* const* tile_rows, float scale,
                                             RunningSoftmax& run, uint32_t (&pa)[kStageKeys / 16][4], unsigned char* p_s, float (&alpha)[2],
                                             int r0, int r1, int quad) {
  float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int j = 0; j < kStageKeys / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const bool valid = tile_rows[8 * j + 2 * quad + e] != nullptr;
      s[4 * j + e] = valid ? s[4 * j + e] * scale : -INFINITY;
      s[4 * j + 2 + e] = valid ? s[4 * j + 2 + e] * scale : -INFINITY;
      tile_max[0] = fmaxf(tile_max[0], s[4 * j + e]);
      tile_max[1] = fmaxf(tile_max[1], s[4 * j + 2 + e]);
    }
  }
  float base[2], p_sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
    const float m = fmaxf(run.max[r], tile_max[r]);
    base[r] = m == -INFINITY ? 0.0f : m;  // no valid key yet: every p is 0
    alpha[r] = exp2f(run.max[r] - base[r]);
    run.max[r] = m;
  }
#pragma unroll
  for (int j = 0; j < kStageKeys / 8; ++j) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float p0 = exp2f(s[4 * j + 2 * r] - base[r]), p1 = exp2f(s[4 * j + 2 * r + 1] - base[r]);
      p_sum[r] += p0 + p1;
      const __nv_bfloat162 pair = __floats2bfloat162_rn(p0, p1);
      const uint32_t bits = *reinterpret_cast<const uint32_t*>(&pair);
      pa[j / 2][(j % 2) * 2 + r] = bits;
      *reinterpret_cast<uint32_t*>(p_s + swizzled_offset(r == 0 ? r0 : r1, j) + 4 * quad) = bits;
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    p_sum[r] += __shfl_xor_sync(0xffffffffu, p_sum[r], 1);
    p_sum[r] += __shfl_xor_sync(0xffffffffu, p_sum[r], 2);
    run.sum[r] = run.sum[r] * alpha[r] + p_sum[r];
  }
}

// The earlier tiles' share of the output, scaled to this tile's running max (heads r0, r1).
__device__ __forceinline__ void rescale(float (&acc)[128], float alpha0, float alpha1) {
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    acc[4 * j] *= alpha0;
    acc[4 * j + 1] *= alpha0;
    acc[4 * j + 2] *= alpha1;
    acc[4 * j + 3] *= alpha1;
  }
}

// acc (64 heads x the group's 256 dims) += P V over the stage's keys (V = the key buffer read
// MN-major), issued, not waited for: group 0 with P from registers (dims 0..255), group 1 with P
// from shared memory (dims 256..511).
__device__ __forceinline__ void add_pv_from_registers(float (&acc)[128], const uint32_t (&pa)[kStageKeys / 16][4],
                                                      const unsigned char* k_s) {
  wgmma_fence();
#pragma unroll
  for (int t = 0; t < (kSkip & 4 ? 0 : kStageKeys / 16); ++t) {
    wgmma_m64n256k16_rs(acc, pa[t], wgmma_descriptor(k_s + t * 2048, kStageColumnBytes, 1024));
  }
}
__device__ __forceinline__ void add_pv_from_shared(float (&acc)[128], const unsigned char* p_s, const unsigned char* k_s) {
  wgmma_fence();
#pragma unroll
  for (int t = 0; t < (kSkip & 4 ? 0 : kStageKeys / 16); ++t) {
    wgmma_m64n256k16_ss(acc, wgmma_descriptor(p_s + t * 32, 16, 1024),
                        wgmma_descriptor(k_s + 4 * kStageColumnBytes + t * 2048, kStageColumnBytes, 1024));
  }
}

// Output rows go through shared memory, bf16 pairs in from the accumulator layout (a row pitch of
// kD * 2 + 16 bytes keeps a warp's pairs in distinct banks), then 16 bytes a thread to device
// memory, a warp's stores contiguous: `heads` rows from `out`.
constexpr int kStagePitch = kD * 2 + 16;
__device__ __forceinline__ void stage_pair(unsigned char* stage, int head, int dim, float x, float y) {
  *reinterpret_cast<__nv_bfloat162*>(stage + head * kStagePitch + dim * 2) = __floats2bfloat162_rn(x, y);
}
__device__ __forceinline__ void write_staged(const unsigned char* stage, __nv_bfloat16* out, int heads) {
  __syncthreads();  // every pair is in
  for (int i = threadIdx.x; i < heads * (kD / 8); i += kThreads) {
    const int h = i / (kD / 8), c = i % (kD / 8);
    *reinterpret_cast<uint4*>(out + h * kD + c * 8) = *reinterpret_cast<const uint4*>(stage + h * kStagePitch + c * 16);
  }
}

// A row of one split: its output, the sink joining the denominator (softmax over [scores, sink]),
// staged where q was.
__device__ __forceinline__ void write_output(const SparseAttentionArgs& a, int64_t row, const float (&acc)[128], const float* max_s,
                                             const float* sum_s, unsigned char* stage, const Part& p) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int h = r == 0 ? p.r0 : p.r1;
    if (h >= a.heads) continue;
    const float m_row = max_s[h], l_row = sum_s[h];
    const float sink = a.sink[h] * kLog2e;
    const float m = fmaxf(m_row, sink);
    const float kept = exp2f(m_row - m);
    const float factor = kept / (l_row * kept + exp2f(sink - m));
#pragma unroll
    for (int j = 0; j < 32; ++j) stage_pair(stage, h, p.d0 + 8 * j, acc[4 * j + 2 * r] * factor, acc[4 * j + 2 * r + 1] * factor);
  }
  write_staged(stage, a.out + row * a.heads * kD, a.heads);
}

template <bool kCluster>
__global__ void __launch_bounds__(kThreads, 1)
    sm90_split_kernel(const SparseAttentionArgs a, int64_t max_splits, const __grid_constant__ CUtensorMap q_map) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char shared_raw[];
  unsigned char* shared = shared_raw + ((1024 - (shared_address(shared_raw) & 1023)) & 1023);
  unsigned char* q_s = shared + Shared::kQ;
  unsigned char* p_s = shared + Shared::kP;
  const __nv_bfloat16** rows_s = reinterpret_cast<const __nv_bfloat16**>(shared + Shared::kRows);
  float* alpha_s = reinterpret_cast<float*>(shared + Shared::kAlpha);
  float* max_s = reinterpret_cast<float*>(shared + Shared::kMax);
  float* sum_s = reinterpret_cast<float*>(shared + Shared::kSum);
  float* sink_s = reinterpret_cast<float*>(shared + Shared::kSink);
  uint64_t* full_s = reinterpret_cast<uint64_t*>(shared + Shared::kFull);  // [buffer]
  trace(0);
  const int block_warp = threadIdx.x / 32;
  if (a.early_inputs) load_early_inputs<kCluster>(a, shared, &q_map);
  wait_for_previous_grid();  // a programmatic dependent launch: nothing else is read before the kernel before it is done
  const float sink = kCluster && threadIdx.x < a.heads ? a.sink[threadIdx.x] : 0.0f;  // for merge_pair, read while the memory is idle

  const int64_t pick = pick_ahead(a, a.first_query + blockIdx.x, blockIdx.y, block_warp, threadIdx.x % 32);  // with query_keys' reads
  const QueryKeys k = query_keys(a, a.first_query + blockIdx.x);
  const int64_t num_keys = k.window_keys + k.compressed_keys, splits = splits_of(num_keys), per_split = split_keys_of(num_keys);
  const int64_t split = blockIdx.y;
  // A cluster's blocks all reach its barriers, a block past the row's splits without work.
  const bool active = split < splits;
  if (!kCluster && !active) return;
  const int64_t first_key = split * per_split;
  const int split_keys = active ? static_cast<int>(min(num_keys - first_key, per_split)) : 0;
  const int tiles = (split_keys + kKeys - 1) / kKeys;  // the lookups' tiles of 64 keys
  const int stages = (split_keys + kStageKeys - 1) / kStageKeys;
  const int64_t row = a.query_rows[k.query];
  const bool pair = kCluster && splits == 2 && active;  // a row of two splits, merged in the cluster
  const int group = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, quad = lane % 4;
  const Part part{16 * warp + lane / 4, 16 * warp + lane / 4 + 8, group * (kD / 2) + 2 * quad, quad, group};

  // q and the first stages go out before the later keys are looked up, each warp copying the rows
  // it looked up (no block barrier stands before the copies); group 1 copies the later stages.
  if (threadIdx.x == 0) {
    for (int b = 0; b < kStages; ++b) init_barrier(&full_s[b], 128);  // a stage's copying warps (4) arrive after their copies
    if (!a.early_inputs) {                                            // else it went out before the wait
      init_barrier(&full_s[kQBarrier], 1);
      load_q_tiles(q_s, &q_map, row, &full_s[kQBarrier]);  // every block, active or not: the wait for it below takes no condition
    }
    if (kCluster) {  // the other split's partials of this block's heads, by st.async (merge_pair)
      init_barrier(&full_s[kReceivedBarrier], 1);
      if (pair) arrive_expect_bytes(&full_s[kReceivedBarrier], pair_bytes(static_cast<int>(split), a.heads));
      init_barrier(&full_s[kQFreeBarrier], 4);  // the other split's q is free: its group 0's warps done with their last scores
    }
  }
  if constexpr (kCluster) cluster_arrive_relaxed();  // the mbarriers are set up (their fence released it), waited for before the tiles
#if DEEPINFER_SM90_TRACE
  asm volatile("" ::"l"(k.start), "l"(k.slot), "l"(row), "l"(pick));  // the row's indices in
  trace(2);
#endif
  find_first_rows(rows_s, a, k, first_key, split_keys, min(tiles, 4), pick, block_warp, lane);
  __syncwarp();
  trace(3);  // this warp's first key rows found (their addresses stored)
  // The first kStages - 1 stages go out now, each warp copying the strip whose rows it looked up
  // (rows 64 t + 8 warp .. + 7 of lookup tile t): stage 0 as a group of copies of its own, waited
  // for before the loop; with four buffers, stage 2 (warps 0-3) and stage 1 (warps 4-7) too, which
  // arrive on their buffers' mbarriers once the block has set the mbarriers up.
  unsigned char* keys_s = shared + Shared::kK;
  const int later = block_warp < 4 ? 2 : 1;  // with four buffers, the warp's start stage after stage 0
  if (stages > 0 && 8 * block_warp < kStageKeys) copy_strip(keys_s, rows_s, a.q, block_warp % kStrips, lane);
  commit_copies();  // stage 0 (q came by the tensor-memory accelerator)
  if constexpr (kStages > 2) {
    if (later < stages) copy_strip(keys_s + later * kStageBytes, rows_s + later * kStageKeys, a.q, block_warp % kStrips, lane);
  }
  commit_copies();  // the later start stages (none: an empty group)
  trace(1);
  find_rows(rows_s, a, k, first_key, split_keys, 4, tiles, block_warp, lane);

  RunningSoftmax run;  // group 0
  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
  const float scale = a.scale * kLog2e;
  wait_copies<1>();  // stage 0's copies (the later start stages' may still be in flight)
  if (kCluster && threadIdx.x < a.heads) sink_s[threadIdx.x] = sink;
  fence_async_shared();  // the copies' writes, for the tensor cores' reads
  __syncthreads();       // q, stage 0 and every rows_s entry are in, the barriers set up
  if constexpr (kStages > 2) {
    if (later < stages) arrive_after_copies(&full_s[later]);  // once its copies (all this thread's so far) land
  }
  wait_barrier(&full_s[kQBarrier], 0);     // q, by every thread: a condition here makes ptxas serialize the wgmmas (C7520)
  if constexpr (kCluster) cluster_wait();  // both blocks' mbarriers are set up: remote arrivals and st.async may go there
  for (int tile = 0; tile < stages; ++tile) {
    unsigned char* k_s = keys_s + (tile % kStages) * kStageBytes;
    // Stage tile + kStages - 1 goes into the buffer stage tile - 1 held, once both groups are done with it.
    const int next = tile + kStages - 1;
    const bool refill = next < stages;
    if (group == 1) {
      if (tile > 0) {
        if (refill) sync_groups<kKeysFree>();
        arrive_groups<kPFree>();
      }
      if (refill) {
        unsigned char* buffer = keys_s + (next % kStages) * kStageBytes;
#pragma unroll
        for (int strip = warp; strip < (kSkip & 1 ? 0 : kStrips); strip += 4)
          copy_strip(buffer, rows_s + next * kStageKeys, a.q, strip, lane);
        arrive_after_copies(&full_s[next % kStages]);
      }
    }
    if (group == 0 && tile > 0 && refill) arrive_groups<kKeysFree>();
    if (tile > 0) wait_barrier(&full_s[tile % kStages], stage_parity(tile));
    trace(4 + 4 * tile);
    if (group == 0) {
      float s[kStageKeys / 2];
      score_tile(s, q_s, k_s);
      trace(5 + 4 * tile);
      if (tile > 0) sync_groups<kPFree>();
      uint32_t pa[kStageKeys / 16][4];
      float alpha[2];
      softmax_tile(s, rows_s + tile * kStageKeys, scale, run, pa, p_s, alpha, part.r0, part.r1, quad);
      if (quad == 0) {
        alpha_s[part.r0] = alpha[0];
        alpha_s[part.r1] = alpha[1];
      }
      fence_async_shared();  // P's writes, for the other group's tensor-core reads
      arrive_groups<kPReady>();
      trace(6 + 4 * tile);
      rescale(acc, alpha[0], alpha[1]);
      add_pv_from_registers(acc, pa, k_s);
    } else {
      sync_groups<kPReady>();
      trace(6 + 4 * tile);
      rescale(acc, alpha_s[part.r0], alpha_s[part.r1]);
      add_pv_from_shared(acc, p_s, k_s);
    }
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_settle(acc);
    trace(7 + 4 * tile);
  }
  // Group 0's warps are done with q (their last scores): the other split may send its partials there (merge_pair).
  if (pair && group == 0 && lane == 0) arrive_remote(&full_s[kQFreeBarrier], static_cast<uint32_t>(1 - split));
  trace(60);
  allow_next_grid();  // the next kernel may launch; a dependent one waits for this grid before it reads

  // Group 0's running max and sum, for both groups.
  if (group == 0 && quad == 0) {
    max_s[part.r0] = run.max[0];
    max_s[part.r1] = run.max[1];
    sum_s[part.r0] = run.sum[0];
    sum_s[part.r1] = run.sum[1];
  }
  __syncthreads();
  if (splits == 1 && active) write_output(a, row, acc, max_s, sum_s, shared, part);
  if constexpr (kCluster) {
    if (pair)
      merge_pair(a, row, static_cast<int>(split), shared, &full_s[kReceivedBarrier], &full_s[kQFreeBarrier], acc, max_s, sum_s, sink_s,
                 part);
  } else if (splits > 1) {
    write_partials(a, max_splits, split, acc, max_s, sum_s, part);
  }
  trace(63);
#else
  __trap();  // built without sm_90a: sm90_attention_supported() keeps this from running
#endif
}

// The driver's cuTensorMapEncodeTiled through the runtime's entry point (no link to the driver
// library), looked up once; null where the driver lacks it.
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const auto encode = []() -> PFN_cuTensorMapEncodeTiled_v12000 {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      return nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}

// Whether the current device is compute capability 9.0 with room for the kernel's shared memory
// and the driver encodes tensor maps, asked once per device.
bool device_runs_kernel() {
  constexpr int kDevices = 64;
  static std::atomic<int> known[kDevices];  // 0 not asked, 1 yes, 2 no
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kDevices) return false;
  if (const int seen = known[device].load(std::memory_order_relaxed); seen != 0) return seen == 1;
  int major = 0, minor = 0, optin = 0;
  const bool yes = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
                   cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess && major == 9 && minor == 0 &&
                   cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) == cudaSuccess &&
                   Shared::kBytes <= optin && tensor_map_encoder() != nullptr;
  known[device].store(yes ? 1 : 2, std::memory_order_relaxed);
  return yes;
}

}  // namespace

cudaError_t sm90_q_tensor_map(const SparseAttentionArgs& a, int box_heads, CUtensorMap& map) {
  map = CUtensorMap{};
  const auto encode = tensor_map_encoder();
  if (encode == nullptr) return cudaErrorNotSupported;
  const cuuint64_t dims[3] = {kD, static_cast<cuuint64_t>(a.heads), static_cast<cuuint64_t>(a.q_rows)};
  const cuuint64_t strides[2] = {kD * 2, static_cast<cuuint64_t>(a.heads) * kD * 2};
  const cuuint32_t box[3] = {64, static_cast<cuuint32_t>(box_heads), 1}, element_strides[3] = {1, 1, 1};
  const CUresult made = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<__nv_bfloat16*>(a.q), dims, strides, box,
                               element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return made == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

bool sm90_attention_supported(const SparseAttentionArgs& a) {
  return a.head_dim == kD && a.heads > 32 && a.heads <= kAllHeads && device_runs_kernel();
}

bool sm90_attention_merges(int64_t max_splits) { return max_splits > 1 && max_splits <= kMaxClusterSplits; }

cudaError_t sm90_split_attention(const SparseAttentionArgs& a, int64_t max_splits, unsigned rows, cudaStream_t stream) {
  CUtensorMap q_map;
  if (const cudaError_t made = sm90_q_tensor_map(a, kAllHeads, q_map); made != cudaSuccess) return made;
  // Rows of 2 splits run as a cluster of the two; every launch is a programmatic dependent of the
  // stream's previous kernel (its launch overlaps that kernel's end; the kernel waits before reading).
  const bool cluster = sm90_attention_merges(max_splits);
  const auto kernel = cluster ? sm90_split_kernel<true> : sm90_split_kernel<false>;
  const cudaError_t configured = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Shared::kBytes);
  if (configured != cudaSuccess) return configured;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(rows, static_cast<unsigned>(max_splits));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = Shared::kBytes;
  config.stream = stream;
  cudaLaunchAttribute attributes[2];
  attributes[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attributes[0].val.programmaticStreamSerializationAllowed = 1;
  attributes[1].id = cudaLaunchAttributeClusterDimension;
  attributes[1].val.clusterDim.x = 1;
  attributes[1].val.clusterDim.y = static_cast<unsigned>(max_splits);
  attributes[1].val.clusterDim.z = 1;
  config.attrs = attributes;
  config.numAttrs = cluster ? 2 : 1;
  return cudaLaunchKernelEx(&config, kernel, a, max_splits, q_map);
}

#if DEEPINFER_SM90_TRACE
void sm90_trace_report() { sm90::report_trace(); }  // tests/model/attention_micro.cu
#endif

}  // namespace deepinfer::model::cuda
