// The prefill regime of the FP4 expert GEMMs (moe_fp4_weights.cuh): tiles of up to 128 rows on
// Hopper's wgmma with the dequantized weights as the register operand (sm_90a only).
#include <algorithm>

#include "model/cuda/mma.cuh"
#include "model/cuda/moe_fp4_weights.cuh"
#include "model/cuda/sm90_bulk.cuh"
#include "model/cuda/sm90_sync.cuh"
#include "model/cuda/wgmma.cuh"
#include "model/cuda/wgmma_rs.cuh"

namespace deepinfer::model::cuda::moe_fp4_detail {
namespace {

constexpr int kConsumerGroups = 2;  // the warpgroups that multiply; one more warp copies
constexpr int kPrefillThreads = kGroupThreads * kConsumerGroups + 32;
#ifndef DEEPINFER_MOE_PREFILL_STAGES
#define DEEPINFER_MOE_PREFILL_STAGES 4
#endif
constexpr int kStages = DEEPINFER_MOE_PREFILL_STAGES;  // superblocks of B in flight
constexpr int kStageBytes = kTileRows * 2 * kSuper;    // the largest image's superblock
#ifndef DEEPINFER_MOE_PREFILL_PREFETCH
#define DEEPINFER_MOE_PREFILL_PREFETCH 4
#endif
constexpr int kPrefillPrefetch = DEEPINFER_MOE_PREFILL_PREFETCH;  // superblocks of weights in flight (shared memory)

// Keeps the compiler from reusing registers a wgmma in flight still reads or writes before the
// wait on it.
template <int N>
__device__ __forceinline__ void hold(uint32_t (&a)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(a[i][0]), "+r"(a[i][1]), "+r"(a[i][2]), "+r"(a[i][3])::"memory");
}

// A barrier of the 128 threads of one warpgroup (named barrier `id`, 1..15).
__device__ __forceinline__ void named_sync(int id) { asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(kGroupThreads) : "memory"); }

// acc += the superblock's eight k16 steps, B the superblock of an image of R rows at `b`.
// Step s's descriptor is b's plus its offset / 16 in the low word: the start address field (bits
// 0..13, the shared address / 16) cannot carry, since shared memory ends below 256 KB.
template <int R>
__device__ __forceinline__ void multiply_rows(float* acc, const uint32_t (&a)[8][4], const uint8_t* b) {
  const uint64_t base = wgmma_descriptor(b, 16, 1024);
  const uint32_t base_lo = static_cast<uint32_t>(base);
  const uint64_t base_hi = base & 0xFFFFFFFF00000000ull;
#pragma unroll
  for (int s = 0; s < 8; ++s) {
    const uint64_t desc = base_hi | (base_lo + static_cast<uint32_t>(((s >> 2) * (R * 128) + 32 * (s & 3)) >> 4));
    if constexpr (R == 16) wgmma_m64n16k16_rs(acc, a[s], desc);
    if constexpr (R == 32) wgmma_m64n32k16_rs(acc, a[s], desc);
    if constexpr (R == 48) wgmma_m64n48k16_rs(acc, a[s], desc);
    if constexpr (R == 64) wgmma_m64n64k16_rs(acc, a[s], desc);
    if constexpr (R == 80) wgmma_m64n80k16_rs(acc, a[s], desc);
    if constexpr (R == 96) wgmma_m64n96k16_rs(acc, a[s], desc);
    if constexpr (R == 112) wgmma_m64n112k16_rs(acc, a[s], desc);
    if constexpr (R == 128) wgmma_m64n128k16_rs(acc, a[s], desc);
  }
}

// One warp's superblock of weights in shared memory (prefill's ring): each lane's 16 bytes of
// rows g and g + 8 and the 4-byte scale words holding its two scales.
struct WeightSlot {
  uint4 lo[32], hi[32];
  uint2 scale[32];
};
constexpr int kSlotStride = 4 * kConsumerGroups;  // the ring is [kPrefillPrefetch][consumer warps]

__device__ __forceinline__ void copy4_async(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(shared_address(dst)), "l"(src) : "memory");
}

// Fragment f's 32 bytes of superblock sb and its scales' 4-byte words (this thread's byte at t),
// asynchronously into `slot`.
template <typename Frag>
__device__ __forceinline__ void copy_async(const Frag& f, WeightSlot& slot, int sb) {
  const int lane = threadIdx.x & 31, t = lane & 3;
  copy16_async(&slot.lo[lane], f.lo + sb * 64, true);
  copy16_async(&slot.hi[lane], f.hi + sb * 64, true);
  copy4_async(&slot.scale[lane].x, f.lo_s - t + sb * 4);
  copy4_async(&slot.scale[lane].y, f.hi_s - t + sb * 4);
}

// This lane's raw weights from its slot (the scale bytes picked out of their words).
__device__ __forceinline__ Raw read_slot(const WeightSlot& slot) {
  const int lane = threadIdx.x & 31, shift = 8 * (lane & 3);
  const uint2 scale = slot.scale[lane];
  return Raw{slot.lo[lane], slot.hi[lane], (scale.x >> shift) & 0xFF, (scale.y >> shift) & 0xFF};
}

// Prefill, one item of a consuming warpgroup: acc = the tile's R columns times the fragment's
// weights over the whole reduction length, B from the ring's buffers in turn (from `stage` at
// `phase`; both advanced past the item). Each superblock: its weights read from this warp's
// shared ring (kPrefillPrefetch slots filled by cp.async, one commit group per superblock, so
// the wait is always for the group committed kPrefillPrefetch groups ago) and dequantized, the
// slot refilled kPrefillPrefetch superblocks ahead (the next item's first ones when `next` is
// set), the wgmmas issued and waited for, the B buffer handed back. The block's other warpgroup
// dequantizes while these run (two register sets in one warpgroup made ptxas serialize the
// wgmmas of this kernel's four tile widths: C7512).
template <int R, typename Frag>
__device__ __forceinline__ void consume(const Frag& frag, const Frag* next, int nsb, WeightSlot* slots, const uint8_t* ring, uint64_t* full,
                                        uint64_t* empty, int& stage, uint32_t& phase, float (&acc)[R / 2]) {
#pragma unroll
  for (int i = 0; i < R / 2; ++i) acc[i] = 0.0f;
  const bool leader = (threadIdx.x & (kGroupThreads - 1)) == 0;
  for (int sb0 = 0; sb0 < nsb; sb0 += kPrefillPrefetch) {
#pragma unroll
    for (int s = 0; s < kPrefillPrefetch; ++s) {
      const int sb = sb0 + s;
      if (sb < nsb) {
        wait_copies<kPrefillPrefetch - 1>();
        uint32_t frags[8][4];
        dequantize(read_slot(slots[s * kSlotStride]), frags);
        if (sb + kPrefillPrefetch < nsb) {
          copy_async(frag, slots[s * kSlotStride], sb + kPrefillPrefetch);
        } else if (next != nullptr) {
          copy_async(*next, slots[s * kSlotStride], sb + kPrefillPrefetch - nsb);  // slot s: nsb is a multiple of kPrefillPrefetch
        }
        commit_copies();
        sm90::wait_barrier(&full[stage], phase);
        wgmma_fence();
        multiply_rows<R>(acc, frags, ring + stage * kStageBytes);
        wgmma_commit();
        wgmma_wait<0>();
        hold(frags);
        wgmma_settle(acc);
        if (leader) sm90::arrive(&empty[stage]);
        if (++stage == kStages) stage = 0, phase ^= 1;
      }
    }
  }
}

// A prefill tile's column (row of the tile) as the down epilogue needs it: its pair.
using Column = int64_t;

// Prefill, one item of a consuming warpgroup: its accumulators, then the epilogue. Down: thread
// c of the warpgroup loads column c's pair before the main loop and puts it in `columns` (this
// warpgroup's 128) after it.
template <bool kGateUp, int R, typename Frag>
__device__ __forceinline__ void run_item(const GemmArgs& a, const Frag& frag, const Frag* next, WeightSlot* slots, int4 tile, int fm,
                                         int nsb, const uint8_t* ring, uint64_t* full, uint64_t* empty, int& stage, uint32_t& phase,
                                         Column* columns, int barrier) {
  const int c = threadIdx.x & (kGroupThreads - 1);
  const Column mine = !kGateUp && c < tile.z ? a.order[tile.y + c] : 0;
  float acc[R / 2];
  consume<R>(frag, next, nsb, slots, ring, full, empty, stage, phase, acc);
  if constexpr (!kGateUp) {
    named_sync(barrier);  // every thread of the warpgroup is done with the last item's columns
    columns[c] = mine;
    named_sync(barrier);
  }
  const int t = threadIdx.x & 3;
#pragma unroll
  for (int j = 0; j < R / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int r = 8 * j + 2 * t + e;
      if (r >= tile.z) continue;
      if constexpr (kGateUp) {
        const float v = swiglu(acc[4 * j + e], acc[4 * j + 2 + e], a.limit);
        uint8_t* image = a.act + int64_t{tile.w} * a.F * 2;
        *reinterpret_cast<__nv_bfloat16*>(image + image_offset(R, r, logical_position(fm))) = __float2bfloat16_rn(v * 0x1p64f);
      } else {
        __nv_bfloat16* dst = a.per_pair + columns[r] * a.F + fm;
        dst[0] = __float2bfloat16_rn(acc[4 * j + e]);
        dst[8] = __float2bfloat16_rn(acc[4 * j + 2 + e]);
      }
    }
  }
}

// run_item for the image width R (a multiple of kImageStep up to kTileRows), W the first width tried.
template <bool kGateUp, int W = kImageStep, typename Frag>
__device__ __forceinline__ void run_width(int R, const GemmArgs& a, const Frag& frag, const Frag* next, WeightSlot* slots, int4 tile,
                                          int fm, int nsb, const uint8_t* ring, uint64_t* full, uint64_t* empty, int& stage,
                                          uint32_t& phase, Column* columns, int barrier) {
  if constexpr (W < kTileRows) {
    if (R != W)
      return run_width<kGateUp, W + kImageStep>(R, a, frag, next, slots, tile, fm, nsb, ring, full, empty, stage, phase, columns, barrier);
  }
  run_item<kGateUp, W>(a, frag, next, slots, tile, fm, nsb, ring, full, empty, stage, phase, columns, barrier);
}

// Prefill tile `index` of all widths, the classes one after the other (moe_fp4_internal.cuh).
__device__ __forceinline__ int4 prefill_tile(const GemmArgs& a, int index) {
  int c = 0;
  while (c < kWidths - 1 && index >= a.count[4 + c]) index -= a.count[4 + c++];
  return a.tiles[c * a.big_cap + index];
}

// Prefill: per block two warpgroups multiply (each 64 weight rows, one wgmma m64nRk16 per k16
// step, R the tile's image rows: 16..128) and one thread copies the tile's B image a superblock
// at a time (32 KB at most) into a ring of kStages buffers (bulk copies completing on mbarriers;
// each buffer handed back once both warpgroups' wgmmas on it are done). Both warpgroups take the
// same (tile, slice of 128 weight rows) items, persistent over them.
template <bool kGateUp>
__global__ void __launch_bounds__(kPrefillThreads, 1) prefill_kernel(const GemmArgs a) {
  using Frag = Fragment<kGateUp>;
  extern __shared__ uint8_t shared_raw[];
  // 1024-aligned in the shared window (the swizzle's atom), kept a pointer into shared_raw so that the
  // compiler knows every pointer made from it is shared memory (ld.shared, not generic loads).
  uint8_t* ring = shared_raw + ((1024u - (shared_address(shared_raw) & 1023u)) & 1023u);
  WeightSlot* weight_ring = reinterpret_cast<WeightSlot*>(ring + kStages * kStageBytes);              // [kPrefillPrefetch][8 warps]
  Column* columns = reinterpret_cast<Column*>(weight_ring + kPrefillPrefetch * 4 * kConsumerGroups);  // [2][128]
  uint64_t* full = reinterpret_cast<uint64_t*>(columns + kConsumerGroups * kGroupThreads);
  uint64_t* empty = full + kStages;
  const int group = threadIdx.x / kGroupThreads, lane = threadIdx.x & 31;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      sm90::init_barrier(&full[s], 1);
      sm90::init_barrier(&empty[s], kConsumerGroups);
    }
  }
  __syncthreads();
  sm90::allow_next_grid();
  const int nsb = a.K / kSuper, slices = a.F / (kConsumerGroups * Frag::kFeaturesPerGroup);
  const int items = a.count[1] * slices;
  if (group == kConsumerGroups) {  // the copying warp
    if (lane == 0) {
      if constexpr (!kGateUp) sm90::wait_for_previous_grid();  // the activations are gate/up's
      int stage = 0;
      uint32_t phase = 0;
      for (int item = blockIdx.x; item < items; item += gridDim.x) {
        const int4 tile = prefill_tile(a, item / slices);
        const uint32_t bytes = big_image_rows(tile.z) * 2 * kSuper;
        const uint8_t* src = a.images + int64_t{tile.w} * a.K * 2;
        for (int sb = 0; sb < nsb; ++sb) {
          sm90::wait_barrier(&empty[stage], phase ^ 1);
          sm90::arrive_expect_bytes(&full[stage], bytes);
          sm90::bulk_copy(ring + stage * kStageBytes, src + int64_t{sb} * bytes, bytes, &full[stage]);
          if (++stage == kStages) stage = 0, phase ^= 1;
        }
      }
      if constexpr (kGateUp) sm90::wait_for_previous_grid();  // so this grid never ends before the one it follows
    }
    return;
  }
  const int warp = (threadIdx.x >> 5) & 3, g = (lane >> 2) & 7;
  WeightSlot* slots = weight_ring + group * 4 + warp;  // this warp's: slot s at slots[s * kSlotStride]
  // The item's fragment: its weight rows f_warp + (g, g + 8) of its tile's expert.
  const auto f_warp_of = [&](int item) {
    return item % slices * (kConsumerGroups * Frag::kFeaturesPerGroup) + group * Frag::kFeaturesPerGroup + warp * Frag::kFeaturesPerWarp;
  };
  const auto first_copies = [&](const Frag& f) {
#pragma unroll
    for (int s = 0; s < kPrefillPrefetch; ++s) {
      if (s < nsb) copy_async(f, slots[s * kSlotStride], s);
      commit_copies();
    }
  };
  const bool chained = nsb % kPrefillPrefetch == 0;  // the next item's first superblocks load during this one's last
  int stage = 0;
  uint32_t phase = 0;
  int item = blockIdx.x;
  if (item >= items) return;
  int4 tile = prefill_tile(a, item / slices);
  Frag frag(a, tile.x, f_warp_of(item));
  first_copies(frag);
  for (; item < items; item += gridDim.x) {
    const int next_item = item + gridDim.x;
    const bool more = next_item < items;
    const int4 next_tile = more ? prefill_tile(a, next_item / slices) : tile;
    const Frag next(a, next_tile.x, more ? f_warp_of(next_item) : 0);
    const int R = big_image_rows(tile.z), fm = f_warp_of(item) + g;
    Column* cols = columns + group * kGroupThreads;
    const Frag* next_ptr = chained && more ? &next : nullptr;
    run_width<kGateUp>(R, a, frag, next_ptr, slots, tile, fm, nsb, ring, full, empty, stage, phase, cols, 1 + group);
    if (more && !chained) first_copies(next);
    tile = next_tile;
    frag = next;
  }
}

}  // namespace

template <bool kGateUp>
cudaError_t launch_prefill(const GemmArgs& g, int64_t max_tiles, int sms, cudaStream_t stream) {
  const int64_t slices = g.F / (kConsumerGroups * Fragment<kGateUp>::kFeaturesPerGroup);
  const size_t shared = size_t{kStages} * kStageBytes + sizeof(WeightSlot) * kPrefillPrefetch * kSlotStride +
                        sizeof(Column) * kConsumerGroups * kGroupThreads + 2 * kStages * sizeof(uint64_t) + 1024;
  const int64_t blocks = std::min<int64_t>(max_tiles * slices, sms);
  if (blocks <= 0) return cudaSuccess;
  return launch_dependent(prefill_kernel<kGateUp>, dim3(static_cast<unsigned>(blocks)), kPrefillThreads, shared, stream, g);
}

template cudaError_t launch_prefill<true>(const GemmArgs&, int64_t, int, cudaStream_t);
template cudaError_t launch_prefill<false>(const GemmArgs&, int64_t, int, cudaStream_t);

}  // namespace deepinfer::model::cuda::moe_fp4_detail
