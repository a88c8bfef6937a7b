#pragma once
// Which key rows the Hopper attention kernel's warps look up for their split
// (model/cuda/sparse_attention_sm90.cu): each warp the rows of the strips it copies, CSA's first
// picks read ahead with the row's start. Internal: included by that file alone.

#include <cuda_bf16.h>

#include <cstdint>

#include "model/cuda/sparse_attention_keys.cuh"
#include "model/cuda/sparse_attention_sm90_layout.cuh"

namespace deepinfer::model::cuda::sm90 {

// The key rows that warp `warp` copies of the split's tiles [begin, end), rows 8 warp .. + 7 of
// each, into rows_s (null past the split's keys): lane l looks up row l % 8 of tiles begin + l / 8,
// + 4, ..., so a warp's lookups of four tiles go out together.
__device__ __forceinline__ void find_rows(const __nv_bfloat16** rows_s, const SparseAttentionArgs& a, const QueryKeys& k, int64_t first_key,
                                          int split_keys, int begin, int end, int warp, int lane) {
  for (int t = begin + lane / 8; t < end; t += 4) {
    const int j = t * kKeys + 8 * warp + lane % 8;
    rows_s[j] = j < split_keys ? key_row<kD>(a, k, first_key + j) : nullptr;
  }
}

// CSA's picks of the first four tiles' keys are read before the row's position is known, as if its
// window were full (its keys W + num_picks, split as splits_of says); the lookup takes them where
// that holds, and looks again where it does not. kNoPick: no pick read.
constexpr int64_t kNoPick = -2;  // picks are -1 (none) or entries
__device__ __forceinline__ int64_t pick_ahead(const SparseAttentionArgs& a, int64_t query, int64_t split, int warp, int lane) {
  if (a.picks == nullptr) return kNoPick;
  const int64_t per_split = split_keys_of(a.window + a.num_picks);
  const int j = (lane / 8) * kKeys + 8 * warp + lane % 8;  // the lane's key in find_first_rows
  const int64_t c = split * per_split + j - a.window;
  if (j >= per_split || c < 0 || c >= a.num_picks) return kNoPick;
  return a.picks[query * a.num_picks + c];
}

// find_rows of tiles [0, end <= 4), with the lane's pick read ahead.
__device__ __forceinline__ void find_first_rows(const __nv_bfloat16** rows_s, const SparseAttentionArgs& a, const QueryKeys& k,
                                                int64_t first_key, int split_keys, int end, int64_t pick, int warp, int lane) {
  const int t = lane / 8, j = t * kKeys + 8 * warp + lane % 8;
  if (t >= end) return;
  if (j >= split_keys) {
    rows_s[j] = nullptr;
  } else if (pick != kNoPick && k.window_keys == a.window && first_key + j >= k.window_keys) {
    rows_s[j] = pick_row<kD>(a, k, pick);
  } else {
    rows_s[j] = key_row<kD>(a, k, first_key + j);
  }
}

}  // namespace deepinfer::model::cuda::sm90
