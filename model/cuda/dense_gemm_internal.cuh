#pragma once
// Shared by the batch-invariant GEMM's files (dense_gemm.cu: mma.sync tiles and the host side;
// dense_gemm_sm90.cu: wgmma tiles; dense_gemm_f32.cu: the device query): the launch parameters,
// the shared-memory stage layout both tensor-core kernels fill, the block order, the stores.
//
// Stage layout: an operand's tile of R rows x U units is [unit][row][64 B], the 16-byte chunk c
// (values 8 c .. 8 c + 7 of the unit) of row r at chunk c ^ ((r / 2) % 4): Hopper's 64-byte
// swizzle, so wgmma reads it as a K-major operand (8-row atoms of 512 bytes) and ldmatrix reads
// 8 rows of one chunk without bank conflicts. Tiles start 1024-byte aligned.

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "model/cuda/mma.cuh"

namespace deepinfer::model::cuda {

// The current device, its multiprocessor count and whether it runs the sm_90a wgmma tiles (compute
// capability 9.0), cached per device.
cudaError_t dense_gemm_device(int& device, int& sms);
cudaError_t dense_gemm_device(int& device, int& sms, bool& wgmma);

constexpr int kUnit = 32;       // reduction values per unit: two k16 steps
constexpr int kUnitBytes = 64;  // one row's unit in bfloat16
constexpr int kGroup = 8;       // token blocks walked before the next feature block (L2 reuse)

struct GemmParams {
  const __nv_bfloat16* x;
  const __nv_bfloat16* w;
  void* y;
  float* partial;  // splits > 1: [group][split][m][n] float32
  int64_t ldx, ldw, ldy;
  int64_t gx, gw, gy;       // element offsets from one group to the next
  int m, n, units;          // units: K / 32
  int splits, split_units;  // range s holds units [s split_units, min(units, (s + 1) split_units))
  int gz;                   // groups
  int token_blocks, feature_blocks;
  bool paired;  // y and ldy allow two-element stores
};

// The wgmma tiles (dense_gemm_sm90.cu): 128 features x `tokens` (64, 128, 192 or 256) tokens a
// block, one block per reduction range; or, `in_block` (128 tokens; where
// dense_gemm_wgmma_in_block(p): ranges of whole stages), one block walking every range in order.
bool dense_gemm_wgmma_in_block(const GemmParams& p);
cudaError_t dense_gemm_wgmma_launch(int tokens, bool in_block, GemmParams p, bool out_float32, int device, cudaStream_t stream);

#ifdef __CUDACC__

// Block `bid`'s token and feature block: groups of kGroup token blocks, token block fastest.
__device__ __forceinline__ void tile_coords(const GemmParams& p, int bid, int& token_block, int& feature_block) {
  const int per_group = kGroup * p.feature_blocks, group = bid / per_group, first = group * kGroup;
  const int size = min(p.token_blocks - first, kGroup), in_group = bid - group * per_group;
  token_block = first + in_group % size;
  feature_block = in_group / size;
}

// Byte offset of chunk `chunk` of row `row` in a [row][64 B] unit (the 64-byte swizzle).
__device__ __forceinline__ int swizzle64(int row, int chunk) { return row * kUnitBytes + ((chunk ^ ((row >> 1) & 3)) << 4); }

// One operand's rows [row0, row0 + kRows) x units [unit0, unit0 + valid) into `dst`
// ([unit][row][64 B], swizzled); rows at or past `rows` are not copied (they feed only outputs
// never stored).
template <int kThreads, int kRows, int kUnits>
__device__ __forceinline__ void copy_rows(uint8_t* dst, const __nv_bfloat16* src, int64_t ld, int row0, int rows, int unit0, int valid) {
  constexpr int kChunks = kRows * kUnits * 4;
#pragma unroll
  for (int r = 0; r < (kChunks + kThreads - 1) / kThreads; ++r) {
    const int c = static_cast<int>(threadIdx.x) + r * kThreads;
    const int part = c & 3, row = (c >> 2) % kRows, u = (c >> 2) / kRows;
    if (c < kChunks && u < valid && row0 + row < rows)
      copy16_async(dst + u * kRows * kUnitBytes + swizzle64(row, part),
                   src + static_cast<int64_t>(row0 + row) * ld + (unit0 + u) * kUnit + part * 8, true);
  }
}

__device__ __forceinline__ void store_one(__nv_bfloat16* dst, float v) { *dst = __float2bfloat16_rn(v); }
__device__ __forceinline__ void store_one(float* dst, float v) { *dst = v; }

// The reduction range and group of this block, and its operands' origins.
struct BlockRange {
  const __nv_bfloat16* x;
  const __nv_bfloat16* w;
  int begin, end;  // units
};
__device__ __forceinline__ BlockRange block_range(const GemmParams& p) {
  const int split = static_cast<int>(blockIdx.y), group = static_cast<int>(blockIdx.z);
  const int begin = split * p.split_units;
  return {p.x + group * p.gx, p.w + group * p.gw, begin, min(p.units, begin + p.split_units)};
}

// Where this block's outputs go: y (one range) or its range's float32 partial sums.
template <class Out>
__device__ __forceinline__ Out* block_output(const GemmParams& p) {
  return static_cast<Out*>(p.y) + static_cast<int>(blockIdx.z) * p.gy;
}
__device__ __forceinline__ float* block_partial(const GemmParams& p) {
  return p.partial + (static_cast<int64_t>(blockIdx.z) * p.splits + blockIdx.y) * p.m * p.n;
}

#endif  // __CUDACC__

}  // namespace deepinfer::model::cuda
