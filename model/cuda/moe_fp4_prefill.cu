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

constexpr int kConsumerGroups = 2;                                      // the warpgroups that multiply
constexpr int kPrefillThreads = kGroupThreads * (kConsumerGroups + 1);  // and a service warpgroup: one warp copies, three write results
#ifndef DEEPINFER_MOE_PREFILL_STAGES
#define DEEPINFER_MOE_PREFILL_STAGES 4
#endif
constexpr int kStages = DEEPINFER_MOE_PREFILL_STAGES;  // ring stages (a superblock of B and of the weights each) in flight
constexpr int kStageBytes = kTileRows * 2 * kSuper;    // the largest image's superblock

// Keeps the compiler from reusing registers a wgmma in flight still reads or writes before the
// wait on it.
template <int N>
__device__ __forceinline__ void hold(uint32_t (&a)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(a[i][0]), "+r"(a[i][1]), "+r"(a[i][2]), "+r"(a[i][3])::"memory");
}

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

// One consumer warp's superblock of weights in shared memory, a stage of the ring: lane l's 16
// bytes of rows g and g + 8 of its fragment (g = l / 4, the block t = l % 4; moe_fp4_weights.cuh)
// and the 4-byte scale words of its 16 rows (row g's four blocks in lo_scale[g]).
struct WeightSlot {
  uint4 lo[32], hi[32];
  uint32_t lo_scale[8], hi_scale[8];
};
constexpr int kConsumerWarps = 4 * kConsumerGroups;

__device__ __forceinline__ void copy4_async(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(shared_address(dst)), "l"(src) : "memory");
}

// What the copying warp's lane l fetches of an item's weights each superblock: for every consumer
// warp w, the 16 bytes its lane l reads of rows lo and hi (Fragment<kGateUp> at w's features), and
// 4 of the item's 128 scale words (word j of the lane: consumer warp (32 j + l) / 16, row
// (32 j + l) % 8 of its lo (bit 3 clear) or hi rows).
template <bool kGateUp>
struct ItemCopies {
  using Frag = Fragment<kGateUp>;
  const uint8_t *lo, *hi;  // consumer warp 0's rows; warp w's are w * warp_bytes further
  const uint8_t* scale[4];
  int64_t warp_bytes;

  __device__ ItemCopies(const GemmArgs& a, int expert, int f_item) {
    const Frag first(a, expert, f_item);
    lo = first.lo;
    hi = first.hi;
    warp_bytes = int64_t{Frag::kFeaturesPerWarp} * (a.K / 2);
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int word = 32 * j + lane, w = word / 16, g = word % 8;
      const bool high = (word & 8) != 0;
      const int matrix = kGateUp ? 2 * expert + (high ? 1 : 0) : expert;
      const int64_t row = f_item + w * Frag::kFeaturesPerWarp + g + (!kGateUp && high ? 8 : 0);
      scale[j] = reinterpret_cast<const uint8_t*>(a.scale[matrix]) + row * (a.K / 32);
    }
  }
  // Superblock sb's weights into the stage's slots (one per consumer warp).
  __device__ __forceinline__ void copy(WeightSlot* slots, int sb) const {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int w = 0; w < kConsumerWarps; ++w) {
      copy16_async(&slots[w].lo[lane], lo + w * warp_bytes + sb * 64, true);
      copy16_async(&slots[w].hi[lane], hi + w * warp_bytes + sb * 64, true);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int word = 32 * j + lane;
      WeightSlot& slot = slots[word / 16];
      copy4_async((word & 8) ? &slot.hi_scale[word % 8] : &slot.lo_scale[word % 8], scale[j] + sb * 4);
    }
  }
};

// This lane's raw weights from its slot (its scale bytes picked out of their rows' words).
__device__ __forceinline__ Raw read_slot(const WeightSlot& slot) {
  const int lane = threadIdx.x & 31, g = lane >> 2, shift = 8 * (lane & 3);
  return Raw{slot.lo[lane], slot.hi[lane], (slot.lo_scale[g] >> shift) & 0xFF, (slot.hi_scale[g] >> shift) & 0xFF};
}

// Prefill, one item of a consuming warpgroup: acc = the tile's R columns times the fragment's
// weights over the whole reduction length, from the ring's stages in turn (from `stage` at
// `phase`; both advanced past the item). Each superblock: wait for the stage (its B superblock
// and this warp's weights, both brought by the copying warp), dequantize the weights, issue the
// wgmmas and wait for them, hand the stage back. The block's other warpgroup dequantizes while
// these run.
template <int R>
__device__ __forceinline__ void consume(int nsb, const WeightSlot* slots, const uint8_t* ring, uint64_t* full, uint64_t* empty, int& stage,
                                        uint32_t& phase, float (&acc)[R / 2]) {
#pragma unroll
  for (int i = 0; i < R / 2; ++i) acc[i] = 0.0f;
  const bool leader = (threadIdx.x & (kGroupThreads - 1)) == 0;
  for (int sb = 0; sb < nsb; ++sb) {
    sm90::wait_barrier(&full[stage], phase);
    uint32_t frags[8][4];
    dequantize(read_slot(slots[stage * kConsumerWarps]), frags);
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

// The hand-over of an item's results from the consuming warpgroups to the epilogue warps: its
// bfloat16 values by column (row of the tile), kOutStride bytes a column (the 4-word padding
// keeps both sides' accesses free of bank conflicts). Gate/up: word 64 c + i of column c is
// feature i's (h of w1, h of w3), the item's 64 features; down: half-word i is feature i's y,
// the item's 128 features.
constexpr int kOutStride = 272;
constexpr int kEpilogueThreads = kGroupThreads - 32;  // the service warpgroup's warps but the copying one

// Prefill, one item of a consuming warpgroup: its accumulators, then the hand-over of their
// values rounded to bfloat16 (as the epilogue rounds them first) once the epilogue warps are done
// with the last item's (out_full counts the 256 consuming threads' arrivals, out_empty the
// epilogue threads'). fi: this thread's feature in the item (down: fi and fi + 8).
template <bool kGateUp, int R>
__device__ __forceinline__ void run_item(const WeightSlot* slots, int fi, int nsb, const uint8_t* ring, uint64_t* full, uint64_t* empty,
                                         int& stage, uint32_t& phase, uint8_t* out, uint64_t* out_full, uint64_t* out_empty,
                                         uint32_t& out_phase) {
  float acc[R / 2];
  consume<R>(nsb, slots, ring, full, empty, stage, phase, acc);
  sm90::wait_barrier(out_empty, out_phase ^ 1);
  const int t = threadIdx.x & 3;
#pragma unroll
  for (int j = 0; j < R / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      uint8_t* column = out + (8 * j + 2 * t + e) * kOutStride;
      const __nv_bfloat16 lo = __float2bfloat16_rn(acc[4 * j + e]), hi = __float2bfloat16_rn(acc[4 * j + 2 + e]);
      if constexpr (kGateUp) {
        reinterpret_cast<__nv_bfloat162*>(column)[fi] = __halves2bfloat162(lo, hi);
      } else {
        reinterpret_cast<__nv_bfloat16*>(column)[fi] = lo;
        reinterpret_cast<__nv_bfloat16*>(column)[fi + 8] = hi;
      }
    }
  }
  sm90::arrive(out_full);
  out_phase ^= 1;
}

// run_item for the image width R (a multiple of kImageStep up to kTileRows), W the first width tried.
template <bool kGateUp, int W = kImageStep>
__device__ __forceinline__ void run_width(int R, const WeightSlot* slots, int fi, int nsb, const uint8_t* ring, uint64_t* full,
                                          uint64_t* empty, int& stage, uint32_t& phase, uint8_t* out, uint64_t* out_full,
                                          uint64_t* out_empty, uint32_t& out_phase) {
  if constexpr (W < kTileRows) {
    if (R != W)
      return run_width<kGateUp, W + kImageStep>(R, slots, fi, nsb, ring, full, empty, stage, phase, out, out_full, out_empty, out_phase);
  }
  run_item<kGateUp, W>(slots, fi, nsb, ring, full, empty, stage, phase, out, out_full, out_empty, out_phase);
}

// The epilogue warps' share of an item (thread e of kEpilogueThreads), from the hand-over `out`.
// Gate/up: SwiGLU of each (column, feature) into the tile's activation image; a thread takes 4
// features that are adjacent there (logical positions 2 t + e, t and e in 0..1: features 8 w + q
// + {0, 4, 32, 36}) and stores their 8 bytes. Down: each column's 128 values, 16 bytes a thread,
// to its pair's row of per_pair (the pairs staged in `columns` first).
template <bool kGateUp>
__device__ __forceinline__ void epilogue(const GemmArgs& a, int4 tile, int f_item, const uint8_t* out, int64_t* columns, int e) {
  const int R = big_image_rows(tile.z);
  if constexpr (kGateUp) {
    uint8_t* image = a.act + int64_t{tile.w} * a.F * 2;
    for (int x = e; x < tile.z * 16; x += kEpilogueThreads) {
      const int r = x >> 4, fi = 8 * ((x >> 2) & 3) + (x & 3);
      const __nv_bfloat162* column = reinterpret_cast<const __nv_bfloat162*>(out + r * kOutStride);
      uint32_t v[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const __nv_bfloat162 h = column[fi + (i & 1) * 4 + (i >> 1) * 32];
        const float act = swiglu(__low2float(h), __high2float(h), a.limit);
        v[i] = __bfloat16_as_ushort(__float2bfloat16_rn(act * 0x1p64f));
      }
      *reinterpret_cast<uint2*>(image + image_offset(R, r, logical_position(f_item + fi))) =
          make_uint2(v[0] | v[1] << 16, v[2] | v[3] << 16);
    }
  } else {
    for (int c = e; c < tile.z; c += kEpilogueThreads) columns[c] = a.order[tile.y + c];
    asm volatile("bar.sync 1, %0;\n" ::"n"(kEpilogueThreads) : "memory");
    for (int x = e; x < tile.z * 16; x += kEpilogueThreads) {
      const int r = x >> 4, chunk = x & 15;
      const uint4 v = *reinterpret_cast<const uint4*>(out + r * kOutStride + 16 * chunk);
      *reinterpret_cast<uint4*>(a.per_pair + columns[r] * a.F + f_item + 8 * chunk) = v;
    }
    asm volatile("bar.sync 1, %0;\n" ::"n"(kEpilogueThreads) : "memory");  // columns read before the next item's
  }
}

// Prefill tile `index` of all widths, the classes one after the other (moe_fp4_internal.cuh).
__device__ __forceinline__ int4 prefill_tile(const GemmArgs& a, int index) {
  int c = 0;
  while (c < kWidths - 1 && index >= a.count[4 + c]) index -= a.count[4 + c++];
  return a.tiles[c * a.big_cap + index];
}

// Prefill: per block two warpgroups multiply (each 64 weight rows, one wgmma m64nRk16 per k16
// step, R the tile's image rows: 16..128) and a third serves them. Its first warp copies: each
// superblock of an item, the tile's B image superblock (32 KB at most, one bulk copy) and the
// eight consumer warps' weights (cp.async, 16 bytes a lane and warp) into a stage of a ring of
// kStages, one mbarrier a stage completing on both; each stage handed back once both warpgroups'
// wgmmas on it are done. Its other three warps write each item's results (epilogue()) from a
// hand-over buffer while the consumers go on with the next item. All take the same (tile, slice of
// 128 weight rows) items, persistent over them.
template <bool kGateUp>
__global__ void __launch_bounds__(kPrefillThreads, 1) prefill_kernel(const GemmArgs a) {
  using Frag = Fragment<kGateUp>;
  extern __shared__ uint8_t shared_raw[];
  // 1024-aligned in the shared window (the swizzle's atom), kept a pointer into shared_raw so that the
  // compiler knows every pointer made from it is shared memory (ld.shared, not generic loads).
  uint8_t* ring = shared_raw + ((1024u - (shared_address(shared_raw) & 1023u)) & 1023u);
  WeightSlot* weight_ring = reinterpret_cast<WeightSlot*>(ring + kStages * kStageBytes);  // [kStages][consumer warps]
  uint8_t* out = reinterpret_cast<uint8_t*>(weight_ring + kStages * kConsumerWarps);      // kTileRows x kOutStride
  int64_t* columns = reinterpret_cast<int64_t*>(out + kTileRows * kOutStride);            // [kTileRows]
  uint64_t* full = reinterpret_cast<uint64_t*>(columns + kTileRows);
  uint64_t* empty = full + kStages;
  uint64_t* out_full = empty + kStages;
  uint64_t* out_empty = out_full + 1;
  const int group = threadIdx.x / kGroupThreads, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      sm90::init_barrier(&full[s], 1 + 32);  // the bulk copy's expected bytes, the copying lanes' cp.async
      sm90::init_barrier(&empty[s], kConsumerGroups);
    }
    sm90::init_barrier(out_full, kConsumerGroups * kGroupThreads);
    sm90::init_barrier(out_empty, kEpilogueThreads);
  }
  __syncthreads();
  sm90::allow_next_grid();
  const int nsb = a.K / kSuper, slices = a.F / (kConsumerGroups * Frag::kFeaturesPerGroup);
  const int items = a.count[1] * slices;
  // The first weight row (feature) of an item.
  const auto f_item = [&](int item) { return item % slices * (kConsumerGroups * Frag::kFeaturesPerGroup); };
  if (group == kConsumerGroups && warp == 0) {  // the copying warp
    bool waited = kGateUp;                      // down's B images are gate/up's activations
    int stage = 0;
    uint32_t phase = 0;
    for (int item = blockIdx.x; item < items; item += gridDim.x) {
      const int4 tile = prefill_tile(a, item / slices);
      const ItemCopies<kGateUp> weights(a, tile.x, f_item(item));
      const uint32_t bytes = big_image_rows(tile.z) * 2 * kSuper;
      const uint8_t* src = a.images + int64_t{tile.w} * a.K * 2;
      for (int sb = 0; sb < nsb; ++sb) {
        sm90::wait_barrier(&empty[stage], phase ^ 1);
        weights.copy(weight_ring + stage * kConsumerWarps, sb);
        sm90::arrive_after_copies(&full[stage]);
        if (lane == 0) {
          if (!waited) sm90::wait_for_previous_grid(), waited = true;
          sm90::arrive_expect_bytes(&full[stage], bytes);
          sm90::bulk_copy(ring + stage * kStageBytes, src + int64_t{sb} * bytes, bytes, &full[stage]);
        }
        if (++stage == kStages) stage = 0, phase ^= 1;
      }
    }
    if constexpr (kGateUp) sm90::wait_for_previous_grid();  // so this grid never ends before the one it follows
    return;
  }
  uint32_t out_phase = 0;
  if (group == kConsumerGroups) {  // the epilogue warps
    for (int item = blockIdx.x; item < items; item += gridDim.x) {
      const int4 tile = prefill_tile(a, item / slices);
      sm90::wait_barrier(out_full, out_phase);
      epilogue<kGateUp>(a, tile, f_item(item), out, columns, threadIdx.x - kConsumerGroups * kGroupThreads - 32);
      sm90::arrive(out_empty);
      out_phase ^= 1;
    }
    return;
  }
  const WeightSlot* slots = weight_ring + group * 4 + warp;  // this warp's: stage s's at slots[s * kConsumerWarps]
  const int fi = group * Frag::kFeaturesPerGroup + warp * Frag::kFeaturesPerWarp + ((lane >> 2) & 7);
  int stage = 0;
  uint32_t phase = 0;
  for (int item = blockIdx.x; item < items; item += gridDim.x) {
    const int4 tile = prefill_tile(a, item / slices);
    run_width<kGateUp>(big_image_rows(tile.z), slots, fi, nsb, ring, full, empty, stage, phase, out, out_full, out_empty, out_phase);
  }
}

}  // namespace

template <bool kGateUp>
cudaError_t launch_prefill(const GemmArgs& g, int64_t max_tiles, int sms, cudaStream_t stream) {
  const int64_t slices = g.F / (kConsumerGroups * Fragment<kGateUp>::kFeaturesPerGroup);
  const size_t shared = size_t{kStages} * (kStageBytes + sizeof(WeightSlot) * kConsumerWarps) + kTileRows * (kOutStride + sizeof(int64_t)) +
                        (2 * kStages + 2) * sizeof(uint64_t) + 1024;
  const int64_t blocks = std::min<int64_t>(max_tiles * slices, sms);
  if (blocks <= 0) return cudaSuccess;
  return launch_dependent(prefill_kernel<kGateUp>, dim3(static_cast<unsigned>(blocks)), kPrefillThreads, shared, stream, g);
}

template cudaError_t launch_prefill<true>(const GemmArgs&, int64_t, int, cudaStream_t);
template cudaError_t launch_prefill<false>(const GemmArgs&, int64_t, int, cudaStream_t);

}  // namespace deepinfer::model::cuda::moe_fp4_detail
