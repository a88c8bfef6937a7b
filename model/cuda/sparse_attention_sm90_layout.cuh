#pragma once
// The Hopper attention kernel's shapes (model/cuda/sparse_attention_sm90.cu): threads, tile sizes,
// the shared-memory layout, and what one thread holds of its block's split. Internal: included by
// that file and its merge (sparse_attention_sm90_merge.cuh) alone.

#include "model/cuda/sparse_attention_keys.cuh"

namespace deepinfer::model::cuda::sm90 {

using namespace attention;

constexpr int kD = 512;
constexpr int kThreads = 256;                     // two warpgroups
constexpr int kTileBytes = kAllHeads * kD * 2;    // 64 rows x 512 bfloat16: 8 swizzled 64-column tiles of 8 KB
constexpr int kColumnTileBytes = kTileBytes / 8;  // 64 rows x 64 columns
constexpr int kPBytes = kAllHeads * kKeys * 2;    // the probabilities, 64 heads x 64 keys
#ifndef DEEPINFER_SM90_SKIP
#define DEEPINFER_SM90_SKIP 0  // timing only (tests/gpu/kernel_micro.sh): 1 no key loads, 2 no scores, 4 no P V, 8 no merged stores
#endif
constexpr int kSkip = DEEPINFER_SM90_SKIP;
// Rows of 2 splits merge in a cluster; more splits go through the merge kernel (a cluster of 4 was
// slower than the merge kernel on HCA at 128K, docs/kernel-notes.md).
constexpr int kMaxClusterSplits = 2;

struct Shared {
  static constexpr int kQ = 0, kK = kTileBytes, kP = 3 * kTileBytes, kRows = kP + kPBytes;
  static constexpr int kAlpha = kRows + kMaxSplitKeys * 8, kMax = kAlpha + kAllHeads * 4, kSum = kMax + kAllHeads * 4;
  // The sinks, read as the kernel starts; the other split's (max, sum) of the heads this block merges.
  static constexpr int kSink = kSum + kAllHeads * 4, kStats = kSink + kAllHeads * 4;
  // The mbarriers: the key buffers', q's, the pair's partials' and the other split's "q is free".
  static constexpr int kFull = kStats + kAllHeads * 8, kBarriers = 8;
  static constexpr int kBytes = kFull + kBarriers * 8 + 1024;  // and room to align the base to 1024
};

// Heads [first, end) of the split's share of the merge, `splits` shares of 64 heads.
__device__ __forceinline__ int share_begin(int split, int splits, int heads) { return split * heads / splits; }

// What one thread holds of its block's split: heads r0, r1 (rows of the accumulators), dims d0 + 8 j + {0, 1}.
struct Part {
  int r0, r1, d0, quad, group;
};

}  // namespace deepinfer::model::cuda::sm90
