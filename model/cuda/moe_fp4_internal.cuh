#pragma once
// What model/cuda/moe_fp4_gemm.cu and moe_fp4_route.cu share: the operand layout of the GEMMs'
// B side (x rows and activations) and the launches of the routing stages (tile lists, the
// prefill rows' gather, the sum over slots). Device code only; moe_fp4_gemm.h is the interface.
//
// The MMA's view of one 128-value stretch of the reduction dimension (a "superblock"): thread t
// of a quad owns the 32 values 32 t .. 32 t + 31 (one e8m0 scale block, 16 packed bytes) of its
// rows. Its 16 bf16 pairs (values 8 w + p and 8 w + p + 4 of the block, pair 4 w + p) feed the
// k16 steps in order: step s takes pairs 2 s (k slots 2 t, 2 t + 1) and 2 s + 1 (2 t + 8, 2 t + 9).
// Weights: pair p of packed word w is nibbles p and p + 4, a mask, a multiply and a mask away
// from bfloat16 (moe_fp4_gemm.cu). The B operand (x rows, activations) is stored with each 16-byte group of 8 values
// reordered to (x0, x4, x1, x5, x2, x6, x3, x7), so one 16-byte shared load gives the pairs of
// two steps.

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace deepinfer::model::cuda::moe_fp4_detail {

constexpr int kSuper = 128;
constexpr int kSmallRows = 8;             // decode tiles: one n8 column tile
constexpr int kTileRows = 64;             // prefill tiles: eight n8 column tiles
constexpr uint32_t kTwo64 = 0x5F805F80u;  // bfloat16 2^64, twice

__device__ __forceinline__ uint32_t mul_bf16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
  return d;
}

// 8 natural bfloat16 values -> the operand order of one group, times 2^64.
__device__ __forceinline__ uint4 to_operand(const uint4 v) {
  return make_uint4(mul_bf16x2(__byte_perm(v.x, v.z, 0x5410), kTwo64), mul_bf16x2(__byte_perm(v.x, v.z, 0x7632), kTwo64),
                    mul_bf16x2(__byte_perm(v.y, v.w, 0x5410), kTwo64), mul_bf16x2(__byte_perm(v.y, v.w, 0x7632), kTwo64));
}

// Shared-memory slot (16 bytes) of group G (thread G / 4's group G % 4) of a row n's superblock:
// swizzled so that a quarter warp's 16-byte loads (2 rows x 4 threads) hit distinct banks.
__device__ __forceinline__ int slot16(int n, int G) { return (G & ~3) | ((G & 3) ^ (G >> 3) ^ ((n & 1) << 1)); }

// Row-major position of feature f in the operand order of its group of 8.
__device__ __forceinline__ int operand_column(int f) { return (f & ~7) | ((f & 3) << 1) | ((f >> 2) & 1); }

// Launches of moe_fp4_route.cu. Tiles are int4 (expert, first sorted row, rows, 0).
// The pairs (token k + slot) of experts[tokens k] that fall in [first, first + E) sorted by
// expert, stable, into order[counts[2]]; each expert's rows cut into decode tiles (1..8 rows:
// one tile) and prefill tiles (64 rows, the last one shorter), in expert order; counts[0],
// counts[1]: how many. One block, route_shared_bytes(E) bytes of shared memory.
size_t route_shared_bytes(int num_experts);
cudaError_t launch_route(const int64_t* experts, int64_t pairs, int64_t first, int num_experts, int64_t* order, int4* small, int4* big,
                         int32_t* counts, cudaStream_t stream);
// gathered[row] = x[order[row] / k] in operand order, times 2^64, for the rows of the prefill
// tiles (big, *count of them, at most max_tiles).
cudaError_t launch_gather(const __nv_bfloat16* x, const int64_t* order, int64_t k, const int4* big, const int32_t* count, int64_t max_tiles,
                          int dim, __nv_bfloat16* gathered, int sms, cudaStream_t stream);
// out[t] = sum over slots s in order of per_pair[t k + s] where experts[t k + s] is in [first, last);
// per_slot: out[t k + s] = that pair's row, or 0 outside [first, last) (no sum).
cudaError_t launch_combine(const float* per_pair, const int64_t* experts, int64_t tokens, int k, int64_t first, int64_t last, int dim,
                           float* out, bool per_slot, int sms, cudaStream_t stream);

}  // namespace deepinfer::model::cuda::moe_fp4_detail
