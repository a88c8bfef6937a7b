// The decode regime of the FP4 expert GEMMs (moe_fp4_weights.cuh): tiles of at most 8 rows,
// each warp on mma.sync m16n8k16 with its weights streamed from HBM through registers.
#include <algorithm>
#include <atomic>
#if DEEPINFER_MOE_TRACE
#include <cstdio>
#include <string>
#include <vector>
#endif

#include "model/cuda/mma.cuh"
#include "model/cuda/moe_fp4_weights.cuh"
#include "model/cuda/sm90_bulk.cuh"

namespace deepinfer::model::cuda::moe_fp4_detail {
namespace {

// A timing experiment (moe_micro.sh's time_trace variant): built with -DDEEPINFER_MOE_TRACE=1, thread 0
// of each block of the decode kernels stamps the global timer at its entry and the SM clock at
// numbered points; moe_fp4_trace_report() prints them for the last launch of each kernel.
// Points: 0 entry, 1 tile known, 2 the ring's loads issued, 3 the rows staged (down: after its
// wait), 4 the first superblock multiplied, 5 the loop done, 6 stored, 7 exit.
#ifndef DEEPINFER_MOE_TRACE
#define DEEPINFER_MOE_TRACE 0
#endif
#if DEEPINFER_MOE_TRACE
constexpr int kTraceBlocks = 2048, kTracePoints = 8;
__device__ unsigned long long trace_ns[2][kTraceBlocks];
__device__ unsigned long long trace_clock[2][kTraceBlocks][kTracePoints];
#endif
template <bool kGateUp>
__device__ __forceinline__ void trace(int point) {
#if DEEPINFER_MOE_TRACE
  if (threadIdx.x != 0 || blockIdx.x >= kTraceBlocks) return;
  if (point == 0) {
    unsigned long long ns;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns)::"memory");
    trace_ns[kGateUp ? 0 : 1][blockIdx.x] = ns;
  }
  trace_clock[kGateUp ? 0 : 1][blockIdx.x][point] = clock64();
#endif
}

// Superblocks of weights in registers (the ring) and blocks resident per multiprocessor asked of
// ptxas (the register budget), for gate/up and for down. Gate/up's rows take 64 KB of shared memory
// (K = 4096), so at most 3 of its blocks are resident whatever their registers.
#ifndef DEEPINFER_MOE_DECODE_PREFETCH_UP
#define DEEPINFER_MOE_DECODE_PREFETCH_UP 4
#endif
#ifndef DEEPINFER_MOE_DECODE_BLOCKS_UP
#define DEEPINFER_MOE_DECODE_BLOCKS_UP 4
#endif
#ifndef DEEPINFER_MOE_DECODE_PREFETCH_DOWN
#define DEEPINFER_MOE_DECODE_PREFETCH_DOWN 4
#endif
#ifndef DEEPINFER_MOE_DECODE_BLOCKS_DOWN
#define DEEPINFER_MOE_DECODE_BLOCKS_DOWN 4
#endif
template <bool kGateUp>
constexpr int kDecodePrefetch = kGateUp ? DEEPINFER_MOE_DECODE_PREFETCH_UP : DEEPINFER_MOE_DECODE_PREFETCH_DOWN;
template <bool kGateUp>
constexpr int kDecodeMinBlocks = kGateUp ? DEEPINFER_MOE_DECODE_BLOCKS_UP : DEEPINFER_MOE_DECODE_BLOCKS_DOWN;

// The decode epilogue: columns (tile rows) 2 t + e of the accumulators' n8 tile; pairs[r]: the
// pair of tile row r.
template <bool kGateUp>
__device__ __forceinline__ void store_columns(const GemmArgs& a, const float (&acc)[4], int4 tile, const int64_t* pairs, int fm) {
  const int t = threadIdx.x & 3;
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const int r = 2 * t + e;
    if (r >= tile.z) continue;
    if constexpr (kGateUp) {  // row tile.w + r, each group of 8 in to_operand order
      const float v = swiglu(acc[e], acc[2 + e], a.limit);
      auto* row = reinterpret_cast<__nv_bfloat16*>(a.act + (int64_t{tile.w} + r) * a.F * 2);
      row[(fm & ~7) | ((fm & 3) << 1) | ((fm >> 2) & 1)] = __float2bfloat16_rn(v * 0x1p64f);
    } else {
      __nv_bfloat16* dst = a.per_pair + pairs[r] * a.F + fm;
      dst[0] = __float2bfloat16_rn(acc[e]);
      dst[8] = __float2bfloat16_rn(acc[2 + e]);
    }
  }
}

// Launches of at most kSmallRows pairs (a.local_pairs) run without the sort: every thread reads
// the routing (keys[i]: pair i's owned expert, or -1) and finds the tiles the sort would have made
// (moe_fp4_internal.cuh): the owned experts ascending, an expert's pairs in pair order, a tile's
// first sorted row and image row the number of owned pairs of lower experts. Made afresh for each
// tile, so that nothing of it stays in registers across the main loop.
struct LocalRouting {
  int keys[kSmallRows];

  __device__ explicit LocalRouting(const GemmArgs& a) {
#pragma unroll
    for (int i = 0; i < kSmallRows; ++i) {
      const int64_t id = i < a.local_pairs ? a.experts[i] - a.first_expert : -1;
      keys[i] = id >= 0 && id < a.num_experts ? static_cast<int>(id) : -1;
    }
  }
  __device__ bool first_of_key(int i) const {
    bool first = keys[i] >= 0;
#pragma unroll
    for (int j = 0; j < kSmallRows; ++j)
      if (j < i && keys[j] == keys[i]) first = false;
    return first;
  }
  __device__ int tiles() const {
    int n = 0;
#pragma unroll
    for (int i = 0; i < kSmallRows; ++i) n += first_of_key(i) ? 1 : 0;
    return n;
  }
  // Tile `index` (< tiles()); thread j < kSmallRows of the block puts pair j at pairs[its row].
  __device__ int4 tile(int index, int64_t* pairs) const {
    int expert = -1;
#pragma unroll
    for (int i = 0; i < kSmallRows; ++i) {
      int rank = 0;
#pragma unroll
      for (int j = 0; j < kSmallRows; ++j) rank += first_of_key(j) && keys[j] < keys[i] ? 1 : 0;
      if (first_of_key(i) && rank == index) expert = keys[i];
    }
    int start = 0, rows = 0;
#pragma unroll
    for (int j = 0; j < kSmallRows; ++j) {
      start += keys[j] >= 0 && keys[j] < expert ? 1 : 0;
      if (keys[j] == expert) {
        if (static_cast<int>(threadIdx.x) == j) pairs[rows] = j;
        ++rows;
      }
    }
    return make_int4(expert, start, rows, start);
  }
};

// Decode rows: row n of a tile at n K 2 bytes of shared memory, superblock sb at + 256 sb, its
// 16-byte group G (values 8 G .. 8 G + 7 of the superblock, in to_operand order) at slot
// decode_slot(n, G): swizzled so that a quarter warp's 16-byte loads (2 rows x 4 threads) hit
// distinct banks. Thread (g, t) of a warp reads its column g's groups 4 t .. 4 t + 3 (one scale
// block) at decode_unit(g, t) ^ (w << 4), w = 0..3.
__device__ __forceinline__ int decode_slot(int n, int G) { return (G & ~3) | ((G & 3) ^ (G >> 3) ^ ((n & 1) << 1)); }
__device__ __forceinline__ uint32_t decode_unit(int g, int t) { return 64 * t + 16 * ((t >> 1) ^ ((g & 1) << 1)); }

// The tile's rows (at most 8; the rest left as they are: they feed only columns never stored)
// into shared memory in the decode layout: gate/up from x (by token), down from the activations
// gate/up wrote for the tile (rows tile.w + n, already in to_operand order).
template <bool kGateUp>
__device__ void stage_decode_rows(const GemmArgs& a, uint8_t* smem, int4 tile, const int64_t* pair) {
  const int rows = tile.z;
  const int shift = rows <= 1 ? 7 : rows <= 2 ? 6 : rows <= 4 ? 5 : 4;  // threads per row: 1 << shift
  const int n = threadIdx.x >> shift, lane = threadIdx.x & ((1 << shift) - 1), groups = a.K / 8, stride = 1 << shift;
  if (n >= rows) return;
  const int64_t src_row = kGateUp ? pair[n] / a.k : int64_t{tile.w} + n;
  const uint4* src = reinterpret_cast<const uint4*>((kGateUp ? reinterpret_cast<const uint8_t*>(a.x) : a.act) + src_row * a.K * 2) + lane;
  // Group lane + stride i: superblock (lane >> 4) + (stride >> 4) i, the same slot in each.
  uint8_t* dst = smem + n * (a.K * 2) + (lane >> 4) * 256 + 16 * decode_slot(n, lane & 15);
  const int per_thread = lane < groups ? (groups - lane + stride - 1) >> shift : 0, sb_step = (stride >> 4) * 256;
  constexpr int kBatch = 8;
  for (int i0 = 0; i0 < per_thread; i0 += kBatch) {
    uint4 v[kBatch];
#pragma unroll
    for (int q = 0; q < kBatch; ++q)
      if (i0 + q < per_thread) v[q] = __ldg(src + int64_t{i0 + q} * stride);
#pragma unroll
    for (int q = 0; q < kBatch; ++q)
      if (i0 + q < per_thread) *reinterpret_cast<uint4*>(dst + (i0 + q) * sb_step) = kGateUp ? to_operand(v[q]) : v[q];
  }
}

// Measuring knobs (tests/gpu/moe_micro.sh's timing-only variants, docs/testing.md; wrong outputs
// by design): DEEPINFER_MOE_TIME_DECODE_DEQUANT, below; DEEPINFER_MOE_TIME_DECODE_NO_LOADS, the
// ring's first superblocks multiplied again and again (no weight loads in the loop).
#ifndef DEEPINFER_MOE_TIME_DECODE_DEQUANT
#define DEEPINFER_MOE_TIME_DECODE_DEQUANT 0
#endif
#ifndef DEEPINFER_MOE_TIME_DECODE_NO_LOADS
#define DEEPINFER_MOE_TIME_DECODE_NO_LOADS 0
#endif
#if DEEPINFER_MOE_TIME_DECODE_DEQUANT
// The instruction mix of a word's dequantization in a repacked bit layout (1: 12 instructions a
// word instead of 17, 2: 8), on the packed words as they are.
__device__ __forceinline__ void time_pairs(uint32_t w, uint32_t f, uint32_t& p0, uint32_t& p1, uint32_t& p2, uint32_t& p3) {
  constexpr uint32_t T = 0x81C081C0u;
#if DEEPINFER_MOE_TIME_DECODE_DEQUANT == 1
  p0 = mul_bf16x2(w & T, f);
  p1 = mul_bf16x2((w << 6) & T, f);
  p2 = mul_bf16x2((w << 3) & T, f);
  p3 = mul_bf16x2(((w & 0x6C006C00u) * 0x00001041u) & T, f);
#else
  p0 = mul_bf16x2(w & T, f);
  p1 = mul_bf16x2(w & (T >> 1), f);
  p2 = mul_bf16x2(w & (T >> 2), f);
  p3 = mul_bf16x2(w & (T >> 3), f);
#endif
}
#endif

// Decode: the superblock's eight k16 steps on mma.sync (each warp on its own: no warpgroup
// lockstep, which made a wgmma version of this kernel slower at a few rows), B the tile's
// rows in the decode layout, this thread's groups at rows + (off ^ (w << 4)) (off: its column
// g's unit in the superblock).
__device__ __forceinline__ void multiply_decode(float (&acc)[4], const Raw& r, const uint8_t* rows, uint32_t off) {
  const uint32_t f_lo = scale_pair(r.lo_scale), f_hi = scale_pair(r.hi_scale);
#if DEEPINFER_MOE_TIME_DECODE_DEQUANT
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    uint32_t a0[4], a1[4];
    time_pairs(word(r.lo, w), f_lo, a0[0], a0[2], a1[0], a1[2]);
    time_pairs(word(r.hi, w), f_hi, a0[1], a0[3], a1[1], a1[3]);
    const uint4 v = *reinterpret_cast<const uint4*>(rows + (off ^ (w << 4)));
    mma(acc, a0, v.x, v.y);
    mma(acc, a1, v.z, v.w);
  }
  return;
#endif
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const uint32_t lo = word(r.lo, w), hi = word(r.hi, w), lo8 = lo >> 8, hi8 = hi >> 8;
    const uint32_t a0[4] = {mul_bf16x2(e2m1_pair<0>(lo), f_lo), mul_bf16x2(e2m1_pair<0>(hi), f_hi), mul_bf16x2(e2m1_pair<1>(lo), f_lo),
                            mul_bf16x2(e2m1_pair<1>(hi), f_hi)};
    const uint32_t a1[4] = {mul_bf16x2(e2m1_pair<0>(lo8), f_lo), mul_bf16x2(e2m1_pair<0>(hi8), f_hi), mul_bf16x2(e2m1_pair<1>(lo8), f_lo),
                            mul_bf16x2(e2m1_pair<1>(hi8), f_hi)};
    const uint4 v = *reinterpret_cast<const uint4*>(rows + (off ^ (w << 4)));
    mma(acc, a0, v.x, v.y);
    mma(acc, a1, v.z, v.w);
  }
}

// Decode: one block of 4 warps per (tile of at most 8 rows, slice of 64 weight rows), persistent
// over them; the tile's rows (the whole reduction length) staged in shared memory, each warp's
// weights streamed from HBM through a register ring kDecodePrefetch superblocks deep. mma.sync
// m16n8k16 gives an element the same bits as the prefill's wgmma (the same k16 steps in the same
// order; checked bit for bit by moe_micro and moe_cuda_tests), so a pair's result does not depend
// on its expert's regime. Down is launched as a programmatic dependent of the kernel before it:
// its weights' prefetch starts before the activations exist.
template <bool kGateUp>
__global__ void __launch_bounds__(kGroupThreads, kDecodeMinBlocks<kGateUp>) decode_kernel(const GemmArgs a) {
  using Frag = Fragment<kGateUp>;
  constexpr int kPrefetch = kDecodePrefetch<kGateUp>;
  extern __shared__ __align__(16) uint8_t rows_smem[];  // [8][K] bfloat16, decode layout
  __shared__ int64_t local_pairs[kSmallRows];           // a local tile's pairs (a.local_pairs > 0)
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int nsb = a.K / kSuper, slices = a.F / Frag::kFeaturesPerGroup;
  trace<kGateUp>(0);
  // Both are programmatic dependents of the kernel before them. Gate/up waits for it before it reads
  // anything (the routing and x are its) and only then lets down start, so that whatever down and
  // the sum after it read before their own waits (the routing, the weights) was written before.
  if constexpr (kGateUp) sm90::wait_for_previous_grid();
  sm90::allow_next_grid();
  bool waited = kGateUp;
  const bool local = a.local_pairs > 0;
  const int items = (local ? LocalRouting(a).tiles() : *a.count) * slices;
  const uint32_t unit = g * (a.K * 2) + decode_unit(g, t);  // this thread's unit of its column g in a superblock
  for (int item = blockIdx.x; item < items; item += gridDim.x) {
    const int4 tile = local ? LocalRouting(a).tile(item / slices, local_pairs) : a.tiles[item / slices];
    const int64_t* pairs = local ? local_pairs : a.order + tile.y;
    const int f_warp = item % slices * Frag::kFeaturesPerGroup + warp * Frag::kFeaturesPerWarp;
    trace<kGateUp>(1);
    const Frag frag(a, tile.x, f_warp);
    Raw ring[kPrefetch];
#pragma unroll
    for (int s = 0; s < kPrefetch; ++s)
      if (s < nsb) frag.load(ring[s], s);
    trace<kGateUp>(2);
    if (!waited) {
      sm90::wait_for_previous_grid();  // the activations are gate/up's
      waited = true;
    }
    if (local) __syncthreads();  // local_pairs written
    stage_decode_rows<kGateUp>(a, rows_smem, tile, pairs);
    __syncthreads();
    trace<kGateUp>(3);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int sb0 = 0; sb0 < nsb; sb0 += kPrefetch) {
#pragma unroll
      for (int s = 0; s < kPrefetch; ++s) {
        const int sb = sb0 + s;
        if (sb < nsb) {
          multiply_decode(acc, ring[s], rows_smem, unit + sb * 256);
#if DEEPINFER_MOE_TRACE
          if (sb == 0) {
            asm volatile("" ::"f"(acc[0]), "f"(acc[1]), "f"(acc[2]), "f"(acc[3]));
            trace<kGateUp>(4);
          }
#endif
#if DEEPINFER_MOE_TIME_DECODE_NO_LOADS  // TIMING ONLY (wrong values): the first superblocks' weights reused
          asm volatile(""
                       : "+r"(ring[s].lo.x), "+r"(ring[s].lo.y), "+r"(ring[s].lo.z), "+r"(ring[s].lo.w), "+r"(ring[s].hi.x),
                         "+r"(ring[s].hi.y), "+r"(ring[s].hi.z), "+r"(ring[s].hi.w), "+r"(ring[s].lo_scale), "+r"(ring[s].hi_scale));
#else
          if (sb + kPrefetch < nsb) frag.load(ring[s], sb + kPrefetch);  // after the multiply: no copy of the slot
#endif
        }
      }
    }
    trace<kGateUp>(5);
    store_columns<kGateUp>(a, acc, tile, pairs, f_warp + g);
    trace<kGateUp>(6);
    __syncthreads();  // the next item overwrites the rows (and local_pairs)
  }
  if (!waited) sm90::wait_for_previous_grid();  // so this grid never ends before the one it follows
  trace<kGateUp>(7);
}

// Blocks of decode_kernel<kGateUp> resident per SM with `shared` bytes of shared memory, cached
// per kernel, device and shared size.
template <bool kGateUp>
cudaError_t resident_blocks(size_t shared, int device, int& blocks) {
  constexpr int kDevices = 64;
  static std::atomic<int64_t> cache[kDevices];  // shared << 16 | blocks
  const auto kernel = decode_kernel<kGateUp>;
  const bool cached = device >= 0 && device < kDevices;
  if (cached) {
    const int64_t entry = cache[device].load(std::memory_order_relaxed);
    if (entry != 0 && static_cast<size_t>(entry >> 16) == shared) {
      blocks = static_cast<int>(entry & 0xFFFF);
      return cudaSuccess;
    }
  }
  cudaError_t error = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared));
  if (error == cudaSuccess) error = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kGroupThreads, shared);
  if (error != cudaSuccess) return error;
  blocks = std::min(std::max(blocks, 1), 0xFFFF);
  if (cached) cache[device].store(static_cast<int64_t>(shared) << 16 | blocks, std::memory_order_relaxed);
  return cudaSuccess;
}

}  // namespace

template <bool kGateUp>
cudaError_t launch_decode(const GemmArgs& g, int64_t max_tiles, int device, int sms, cudaStream_t stream) {
  const int64_t slices = g.F / Fragment<kGateUp>::kFeaturesPerGroup;
  const size_t shared = size_t{kSmallRows} * g.K * 2;
  int per_sm = 0;
  const cudaError_t error = resident_blocks<kGateUp>(shared, device, per_sm);
  if (error != cudaSuccess) return error;
  const int64_t blocks = std::min<int64_t>(max_tiles * slices, int64_t{sms} * per_sm);
  if (blocks <= 0) return cudaSuccess;
  return launch_dependent(decode_kernel<kGateUp>, dim3(static_cast<unsigned>(blocks)), kGroupThreads, shared, stream, g);
}

#if DEEPINFER_MOE_TRACE
// The last launch of each decode kernel: its blocks' entries by the global timer (after the
// earliest gate/up entry) and each point's time after its block's entry (the SM clock at the
// device's rate): minimum, median and largest. The entries are then cleared.
void trace_report() {
  std::vector<unsigned long long> ns(2 * kTraceBlocks), clk(2 * kTraceBlocks * kTracePoints);
  if (cudaMemcpyFromSymbol(ns.data(), trace_ns, ns.size() * 8) != cudaSuccess ||
      cudaMemcpyFromSymbol(clk.data(), trace_clock, clk.size() * 8) != cudaSuccess)
    return;
  const auto c = [&](int k, int b, int p) { return clk[(size_t(k) * kTraceBlocks + b) * kTracePoints + p]; };
  unsigned long long origin = ~0ull;
  for (int b = 0; b < kTraceBlocks; ++b)
    if (ns[b] != 0) origin = std::min(origin, ns[b]);
  int khz = 0, device = 0;  // the SM clock's rate: the device's (one stamp of the timer a block)
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device);
  const double ghz = khz * 1e-6;
  const auto stats = [](std::vector<double> v, const char* what) {
    if (v.empty()) return;
    std::sort(v.begin(), v.end());
    std::printf("    %-28s min %6.2f  median %6.2f  max %6.2f us (%zu)\n", what, v.front(), v[v.size() / 2], v.back(), v.size());
  };
  static const char* names[kTracePoints] = {
      "entry", "tile known", "ring loads issued", "rows staged", "first superblock done", "loop done", "stored", "exit"};
  for (int k = 0; k < 2; ++k) {
    std::printf("  trace %s (clock %.2f GHz, entries by the global timer after gate/up's first):\n", k == 0 ? "gate/up" : "down", ghz);
    std::vector<double> entry, exit_at;
    for (int b = 0; b < kTraceBlocks; ++b)
      if (ns[k * kTraceBlocks + b] != 0) {
        entry.push_back((ns[k * kTraceBlocks + b] - origin) * 1e-3);
        exit_at.push_back((ns[k * kTraceBlocks + b] - origin) * 1e-3 + double(c(k, b, 7) - c(k, b, 0)) / ghz * 1e-3);
      }
    stats(entry, "entry (global timer)");
    for (int p = 1; p < kTracePoints; ++p) {
      std::vector<double> v;
      for (int b = 0; b < kTraceBlocks; ++b)
        if (ns[k * kTraceBlocks + b] != 0 && c(k, b, p) >= c(k, b, 0)) v.push_back(double(c(k, b, p) - c(k, b, 0)) / ghz * 1e-3);
      stats(v, (std::string(names[p]) + " (after entry)").c_str());
    }
    stats(exit_at, "exit (timer + clock)");
  }
  void* p = nullptr;
  if (cudaGetSymbolAddress(&p, trace_ns) == cudaSuccess) cudaMemset(p, 0, ns.size() * 8);
}
#endif

template cudaError_t launch_decode<true>(const GemmArgs&, int64_t, int, int, cudaStream_t);
template cudaError_t launch_decode<false>(const GemmArgs&, int64_t, int, int, cudaStream_t);

}  // namespace deepinfer::model::cuda::moe_fp4_detail

#if DEEPINFER_MOE_TRACE
namespace deepinfer::model::cuda {
void moe_fp4_trace_report() { moe_fp4_detail::trace_report(); }
}  // namespace deepinfer::model::cuda
#endif
