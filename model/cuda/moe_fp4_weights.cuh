#pragma once
// What the FP4 expert GEMM kernels share (moe_fp4_decode.cu, moe_fp4_prefill.cu) and what
// moe_fp4_gemm.cu launches them with: their arguments, a warp's weight fragment (rows g and g + 8
// of 16, thread t's 16 packed bytes and scale of each superblock), its dequantization into the
// MMA's A operand, SwiGLU, and the two regimes' launches. Device code only, no torch types;
// moe_fp4_gemm.h is the interface, moe_fp4_internal.cuh the B side's layouts.

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "model/cuda/moe_fp4_internal.cuh"

namespace deepinfer::model::cuda::moe_fp4_detail {

constexpr int kGroupThreads = 128;  // a block of the decode kernel; a warpgroup (64 weight rows) of the prefill one

struct GemmArgs {
  const uint64_t* packed;  // w13 (2 per expert) or w2 (1 per expert) device pointers
  const uint64_t* scale;
  const __nv_bfloat16* x;   // decode gate/up: the x rows, read by token
  const uint8_t* images;    // prefill gate/up: the gathered x images; down: the activation images
  const int64_t* order;     // [pairs] sorted by expert (routed)
  const int4* tiles;        // (expert, first sorted row, rows, image row)
  const int32_t* count;     // decode: counts[0]; prefill: counts (the classes at counts[4 ..])
  int64_t big_cap;          // prefill: the tiles of width class c at tiles + c big_cap
  uint8_t* act;             // gate/up output: the activation images
  __nv_bfloat16* per_pair;  // down output [pairs, D]: each pair's y, not yet weighted (the sum over slots weights it)
  // Decode with at most kSmallRows pairs in all (local_pairs of them; 0 otherwise): no sort ran,
  // each block finds its tile from the routing itself (local_tile()); tiles and order are unused.
  const int64_t* experts;
  int64_t first_expert;
  int num_experts;
  int local_pairs;
  int64_t k;
  int K;  // reduction length: D (gate/up) or I (down)
  int F;  // output features per matrix: I (gate/up) or D (down)
  float limit;
};

// One thread's share of a warp's weight fragment for one superblock: 16 packed bytes of rows g
// (lo) and g + 8 (hi) and their e8m0 scales.
struct Raw {
  uint4 lo, hi;
  uint32_t lo_scale, hi_scale;
};

__device__ __forceinline__ uint4 load_weights(const uint8_t* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ uint32_t word(const uint4& v, int w) { return w == 0 ? v.x : w == 1 ? v.y : w == 2 ? v.z : v.w; }

// Nibbles p and p + 4 (p in {0, 1}) of w as a bfloat16 pair of e2m1 value x 2^-126: the sign
// to bit 15, the magnitude bits to the exponent's two low bits and the mantissa's top bit (code
// 1 is the subnormal 2^-127). The masked nibbles times 2^(6 - 4p) + 2^(12 - 4p) are two copies
// that do not overlap (bits 6..9 and 12..15 of each half), so one multiply and two masks do it.
// Nibbles 2 and 3 are those of w >> 8.
template <int p>
__device__ __forceinline__ uint32_t e2m1_pair(uint32_t w) {
  constexpr uint32_t kNibbles = 0x000F000Fu << (4 * p), kCopies = (1u << (6 - 4 * p)) + (1u << (12 - 4 * p));
  return ((w & kNibbles) * kCopies) & 0x81C081C0u;
}

// bfloat16 2^(s - 1 - 64), twice: e2m1 x 2^-126 times this is the weight times 2^-64.
__device__ __forceinline__ uint32_t scale_pair(uint32_t s) {
  const uint32_t b = min(s + 62u, 255u) << 7;
  return b | (b << 16);
}

__device__ __forceinline__ float bf16_round(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

// The superblock's eight k16 A fragments (the mma.sync m16n8k16 layout: rows g, g + 8 of the
// warp's 16) from this thread's raw weights.
__device__ __forceinline__ void dequantize(const Raw& r, uint32_t (&a)[8][4]) {
  const uint32_t f_lo = scale_pair(r.lo_scale), f_hi = scale_pair(r.hi_scale);
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const uint32_t lo = word(r.lo, w), hi = word(r.hi, w), lo8 = lo >> 8, hi8 = hi >> 8;
    a[2 * w][0] = mul_bf16x2(e2m1_pair<0>(lo), f_lo);
    a[2 * w][1] = mul_bf16x2(e2m1_pair<0>(hi), f_hi);
    a[2 * w][2] = mul_bf16x2(e2m1_pair<1>(lo), f_lo);
    a[2 * w][3] = mul_bf16x2(e2m1_pair<1>(hi), f_hi);
    a[2 * w + 1][0] = mul_bf16x2(e2m1_pair<0>(lo8), f_lo);
    a[2 * w + 1][1] = mul_bf16x2(e2m1_pair<0>(hi8), f_hi);
    a[2 * w + 1][2] = mul_bf16x2(e2m1_pair<1>(lo8), f_lo);
    a[2 * w + 1][3] = mul_bf16x2(e2m1_pair<1>(hi8), f_hi);
  }
}

__device__ __forceinline__ float swiglu(float gate_acc, float up_acc, float limit) {
  float gate = bf16_round(gate_acc), up = bf16_round(up_acc);
  if (limit > 0.0f) {
    gate = bf16_round(fminf(gate, limit));
    up = bf16_round(fminf(fmaxf(up, -limit), limit));
  }
  const float silu = bf16_round(gate / (1.0f + expf(-gate)));
  return bf16_round(silu * up);
}

// Where a warp's fragment comes from: gate/up, 8 features f of w1 (rows g) and the same 8 of w3
// (rows g + 8), so SwiGLU is local to a thread; down, 16 features f, f + 8 of w2.
template <bool kGateUp>
struct Fragment {
  static constexpr int kFeaturesPerWarp = kGateUp ? 8 : 16;
  static constexpr int kFeaturesPerGroup = 4 * kFeaturesPerWarp;
  const uint8_t *lo, *hi, *lo_s, *hi_s;

  __device__ Fragment(const GemmArgs& a, int expert, int f_warp) {
    const int t = threadIdx.x & 3, g = (threadIdx.x >> 2) & 7;
    const int64_t f = f_warp + g, half_row = a.K / 2, scale_row = a.K / 32;
    const int lo_matrix = kGateUp ? 2 * expert : expert, hi_matrix = kGateUp ? 2 * expert + 1 : expert;
    const int64_t hi_row = kGateUp ? f : f + 8;
    lo = reinterpret_cast<const uint8_t*>(a.packed[lo_matrix]) + f * half_row + 16 * t;
    hi = reinterpret_cast<const uint8_t*>(a.packed[hi_matrix]) + hi_row * half_row + 16 * t;
    lo_s = reinterpret_cast<const uint8_t*>(a.scale[lo_matrix]) + f * scale_row + t;
    hi_s = reinterpret_cast<const uint8_t*>(a.scale[hi_matrix]) + hi_row * scale_row + t;
  }
  __device__ __forceinline__ void load(Raw& r, int sb) const {
    r.lo = load_weights(lo + sb * 64);
    r.hi = load_weights(hi + sb * 64);
    r.lo_scale = __ldg(lo_s + sb * 4);
    r.hi_scale = __ldg(hi_s + sb * 4);
  }
};

// Decode tiles (tiles, *count of them, at most max_tiles): a persistent grid of blocks of 4 warps,
// a programmatic dependent of the stream's previous kernel.
template <bool kGateUp>
cudaError_t launch_decode(const GemmArgs& g, int64_t max_tiles, int device, int sms, cudaStream_t stream);
// Prefill tiles (tiles + c big_cap by width class c, count[4 + c] of them, count[1] in all, at most
// max_tiles): a persistent grid of one block per SM, a programmatic dependent of the previous kernel.
template <bool kGateUp>
cudaError_t launch_prefill(const GemmArgs& g, int64_t max_tiles, int sms, cudaStream_t stream);

}  // namespace deepinfer::model::cuda::moe_fp4_detail
