#include "model/cuda/sparse_attention_heads.h"

#include <cuda.h>

#include "model/cuda/sparse_attention_heads_ring.cuh"
#include "model/cuda/sparse_attention_sm90.h"

// DEEPINFER_HEADS_OVERLAP=1: warpgroup 0 issues tile t + 1's scores before tile t's P V and runs
// the softmax of t + 1 while the tensor cores add t (P^T and the factors double-buffered); the same
// arithmetic in the same order, so the same bits. A variant until measured (kernel_micro.sh heads).
#ifndef DEEPINFER_HEADS_OVERLAP
#define DEEPINFER_HEADS_OVERLAP 0
#endif
// DEEPINFER_SM90_TRACE=1 (kernel_micro.sh trace): one thread of each warpgroup stamps points 0
// entry, 1 the rows found, 2 q in (the computing groups), then for tile t < 11 at 4 + 5 t + {group 0:
// 0 its quarters in, 1 scores done, 2 P buffer free, 3 P^T handed over, 4 P V done; group 1: 0 P^T
// ready, 1 its quarters in, 4 P V done; the copiers: 0 the tile's first slot free, 1 its last
// quarter's copies issued}, 60 tiles done, 61 and 62 the end's barriers, 63 exit.

namespace deepinfer::model::cuda {
namespace {

using namespace attention;
using namespace sm90;
using namespace heads;

constexpr int kPTBytes = kHalfHeads * kKeys * 2;  // P^T: 32 heads x 64 keys (K-major B: keys along a row)
constexpr int kStagePitch = kD * 2 + 16;          // an output row staged (distinct banks for a warp's stores)
constexpr int kDone = 4;  // the two warpgroups' named barrier at the end (1: group 0's own; 2, 3, 5, 6: the P buffers')
constexpr int kPBuffers = DEEPINFER_HEADS_OVERLAP ? 2 : 1;  // P^T and the factors: tile t's in buffer t % kPBuffers

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
  if (DEEPINFER_HEADS_FENCE_ONCE) fence_async_shared();
#pragma unroll
  for (int i = 0; i < 16; ++i) s[i] = 0.0f;
  wgmma_settle(s);
}

// S^T of tile t, waited for.
__device__ __forceinline__ void score_keys(float (&s)[16], const unsigned char* q_s, const unsigned char* ring, uint64_t* full, int t) {
  prepare_scores(s, full, t);
  trace_tile(t, 0);
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
    if (lane < 4 && !(DEEPINFER_HEADS_SKIP & 8)) red[head_of(h, quad) * 4 + warp] = m[h];
  }
  if (!(DEEPINFER_HEADS_SKIP & 8)) sync_group0();
#pragma unroll
  for (int h = 0; h < 8; ++h) {
    const int c = head_of(h, quad), i = 4 * (h / 2) + h % 2;
    const float4 w = DEEPINFER_HEADS_SKIP & 8 ? make_float4(m[h], m[h], m[h], m[h]) : *reinterpret_cast<const float4*>(red + c * 4);
    const float next = fmaxf(run.max[h], fmaxf(fmaxf(w.x, w.y), fmaxf(w.z, w.w)));
    const float base = next == -INFINITY ? 0.0f : next;  // no valid key yet: every p is 0
    alpha[h] = exp2f(run.max[h] - base);
    run.max[h] = next;
    const float p0 = exp2f(s[i] - base), p1 = exp2f(s[i + 2] - base);
    run.sum[h] = run.sum[h] * alpha[h] + (p0 + p1);
    if (DEEPINFER_HEADS_SKIP & 16) continue;
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
      trace_tile(t, 1);
      if (t >= kPBuffers) sync_groups(free_barrier(t));  // warpgroup 1 is done with tile t - kPBuffers's P^T and factors
      trace_tile(t, 2);
      softmax(s, t, run, alpha);
      trace_tile(t, 3);
      add_values(acc, alpha, p_s(t), ring(), t, 0);
      trace_tile(t, 4);
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
    trace_tile(t, 0);
    wait_quarter(full, t, 2);
    wait_quarter(full, t, 3);
    if (DEEPINFER_HEADS_FENCE_ONCE) fence_async_shared();
    trace_tile(t, 1);
    const float* alpha_s = reinterpret_cast<const float*>(shared + HeadsShared::kAlpha) + (t % kPBuffers) * kHalfHeads;
#pragma unroll
    for (int h = 0; h < 8; ++h) alpha[h] = alpha_s[head_of(h, quad)];
    add_values(acc, alpha, shared + HeadsShared::kP + (t % kPBuffers) * kPTBytes, shared + HeadsShared::kRing, t, 4);
    trace_tile(t, 4);
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
  trace(0);
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
  trace(1);
  const int group = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, quad = lane % 4;
  if (group >= 2) {  // a warpgroup's condition: one of threadIdx.x >= kConsumers made ptxas serialize the wgmmas (C7520)
    lower_registers<kCopyRegisters>();
    copy_quarters(ring, rows_s, a.q, 4 * tiles, full, free, threadIdx.x - kConsumers);
    trace(63);
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
  trace(2);
  if (group == 0) {
    const Group0 g{shared, rows_s, full, free, a.scale * kLog2e, warp, lane};
    if (DEEPINFER_HEADS_OVERLAP)
      g.run_tiles_overlapped(acc, run, tiles);
    else
      g.run_tiles(acc, run, tiles);
  } else {
    group1_tiles(acc, shared, full, free, tiles, lane);
  }
  trace(60);
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
  trace(61);
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
  trace(62);
  const int heads = min(kHalfHeads, a.heads - first_head);
  __nv_bfloat16* out = a.out + (row * a.heads + first_head) * kD;
  for (int i = threadIdx.x; i < heads * (kD / 8); i += kConsumers) {
    const int h = i / (kD / 8), c = i % (kD / 8);
    *reinterpret_cast<uint4*>(out + h * kD + c * 8) = *reinterpret_cast<const uint4*>(stage + h * kStagePitch + c * 16);
  }
  trace(63);
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

#if DEEPINFER_SM90_TRACE
void heads_trace_report() { sm90::report_trace(); }  // tests/model/attention_micro.cu
#endif

}  // namespace deepinfer::model::cuda
