#pragma once
// The Hopper attention kernels' shapes (model/cuda/sparse_attention_sm90.cu): threads, tile sizes,
// the shared-memory layout, what one thread holds of its block's split, and the key copies the
// head-split kernel (sparse_attention_heads.cu) shares. Internal: included by those files and the
// split kernel's merge (sparse_attention_sm90_merge.cuh) alone.

#include "model/cuda/mma.cuh"
#include "model/cuda/sparse_attention_keys.cuh"
#include "model/cuda/wgmma.cuh"

namespace deepinfer::model::cuda::sm90 {

using namespace attention;

constexpr int kD = 512;
constexpr int kThreads = 256;                     // two warpgroups
constexpr int kTileBytes = kAllHeads * kD * 2;    // 64 rows x 512 bfloat16: 8 swizzled 64-column tiles of 8 KB
constexpr int kColumnTileBytes = kTileBytes / 8;  // 64 rows x 64 columns
constexpr int kPBytes = kAllHeads * kKeys * 2;    // the probabilities, 64 heads x 64 keys
constexpr float kLog2e = 1.4426950408889634f;
#ifndef DEEPINFER_SM90_SKIP
#define DEEPINFER_SM90_SKIP 0  // timing experiments only (tests/gpu/kernel_micro.sh): 1 no key loads, 2 no scores, 4 no P V
#endif
constexpr int kSkip = DEEPINFER_SM90_SKIP;
// Rows of 2 splits merge in a cluster; more splits go through the merge kernel (a cluster of 4 was
// slower than the merge kernel on HCA at 128K, docs/kernel-notes.md).
constexpr int kMaxClusterSplits = 2;

struct Shared {
  static constexpr int kQ = 0, kK = kTileBytes, kP = 3 * kTileBytes, kRows = kP + kPBytes;
  static constexpr int kAlpha = kRows + kMaxSplitKeys * 8, kMax = kAlpha + kAllHeads * 4, kSum = kMax + kAllHeads * 4;
  static constexpr int kFull = kSum + kAllHeads * 4;   // the key buffers' mbarriers, then q's
  static constexpr int kBytes = kFull + 3 * 8 + 1024;  // and room to align the base to 1024
};

// Heads [first, end) of the split's share of the merge, `splits` shares of 64 heads.
__device__ __forceinline__ int share_begin(int split, int splits, int heads) { return split * heads / splits; }

// What one thread holds of its block's split: heads r0, r1 (rows of the accumulators), dims d0 + 8 j + {0, 1}.
struct Part {
  int r0, r1, d0, quad, group;
};

// Warp `warp` (of the block's 8) copies its 8 of a tile's 64 rows, rows 8 warp .. 8 warp + 7 of
// 512 bfloat16, into a swizzled tile, half a row per copy: row r from rows[r] (null: zeros, the
// readable `fallback` standing in for the address).
__device__ __forceinline__ void copy_strip(unsigned char* tile, const __nv_bfloat16* const* rows, const __nv_bfloat16* fallback, int warp,
                                           int lane) {
  const __nv_bfloat16* src[8];  // read before the copies: each copy's asm may write memory, so none could be read between them
#pragma unroll
  for (int i = 0; i < 8; ++i) src[i] = rows[8 * warp + i];
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int r = j / 2, c = (j % 2) * 32 + lane;
    copy16_async(tile + (c / 8) * kColumnTileBytes + swizzled_offset(8 * warp + r, c % 8), src[r] != nullptr ? src[r] + c * 8 : fallback,
                 src[r] != nullptr);
  }
}

}  // namespace deepinfer::model::cuda::sm90
