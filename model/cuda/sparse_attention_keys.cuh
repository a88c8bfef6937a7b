#pragma once
// What a query row of the paged attention attends over, and how a row's keys are split among
// thread blocks: shared by the attention kernels (sparse_attention.cu, sparse_attention_sm90.cu).
// A row's splits depend on its own key count only, so its result never depends on the batch.

#include <cuda_bf16.h>

#include <cstdint>

#include "model/cuda/paged_entries.cuh"
#include "model/cuda/sparse_attention.h"

namespace deepinfer::model::cuda::attention {

constexpr int kKeys = 64;                      // keys per tile
constexpr int kAllHeads = 64;                  // the split kernels hold all of a row's heads (33..64)
constexpr int kSplitKeys = 5 * kKeys;          // keys per split, until a row would need more than kMaxSplits
constexpr int kMaxSplits = 16;                 // then the splits grow (in whole tiles) instead
constexpr int kMaxSplitKeys = 16 * kKeys;      // the most keys one split can hold (shared key pointers)
constexpr float kLog2e = 1.4426950408889634f;  // scores and the running max / sum are in log2 units

// A row's keys per split and splits, from its own key count only (batch invariance).
__host__ __device__ inline int64_t split_keys_of(int64_t num_keys) {
  const int64_t spread = (num_keys + kMaxSplits - 1) / kMaxSplits;
  return spread <= kSplitKeys ? kSplitKeys : (spread + kKeys - 1) / kKeys * kKeys;
}
__host__ __device__ inline int64_t splits_of(int64_t num_keys) {
  const int64_t per_split = split_keys_of(num_keys);
  return (num_keys + per_split - 1) / per_split;
}

// The Hopper kernel's split partials, as both its merges take them (its pair's in
// sparse_attention_sm90_merge.cuh, combine_kernel<D, true>): a value rounded to bfloat16, pairs
// packed in 32 bits.
__device__ __forceinline__ float partial_value(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
__device__ __forceinline__ uint32_t pack_partials(float x, float y) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(x, y);
  return *reinterpret_cast<const uint32_t*>(&pair);
}
__device__ __forceinline__ float2 unpack_partials(uint32_t bits) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&bits));
}

// What one query row attends over.
struct QueryKeys {
  int64_t seq, query, position, start, slot;
  int64_t window_keys;      // min(W, position + 1)
  int64_t compressed_keys;  // HCA: visible entries; CSA: the picks (some may be -1)
};

// Compressed entry w of the query's sequence (null for w < 0, a pick of none).
template <int D>
__device__ inline const __nv_bfloat16* entry_row(const SparseAttentionArgs& a, const QueryKeys& k, int64_t w) {
  if (w < 0) return nullptr;
  return a.entries + paged_entry_row(a.block_tables, k.seq * a.block_stride, w, a.ratio) * D;
}

// A pick's entry row: picks hold entry ids (through the block table) or, with picks_are_rows,
// rows of `entries` (the table applied where the picks were made: one dependent read less here).
template <int D>
__device__ inline const __nv_bfloat16* pick_row(const SparseAttentionArgs& a, const QueryKeys& k, int64_t pick) {
  if (!a.picks_are_rows) return entry_row<D>(a, k, pick);
  return pick < 0 ? nullptr : a.entries + pick * D;
}

// Key j of a query's list (window first, oldest position first; then the compressed entries in
// entry / pick order), or null for a pick of -1 and j past the end.
template <int D>
__device__ inline const __nv_bfloat16* key_row(const SparseAttentionArgs& a, const QueryKeys& k, int64_t j) {
  if (j < k.window_keys) {
    const int64_t p = k.position - k.window_keys + 1 + j;
    if (p < k.start) return a.ring + (k.slot * a.window + p % a.window) * D;
    return a.kv + a.query_rows[k.seq * a.len + (p - k.start)] * D;
  }
  const int64_t c = j - k.window_keys;
  if (c >= k.compressed_keys) return nullptr;
  if (a.picks == nullptr) return entry_row<D>(a, k, c);
  return pick_row<D>(a, k, a.picks[k.query * a.num_picks + c]);
}

// Query row `query` (of the launch's rows, from a.first_query) and what it attends over.
__device__ inline QueryKeys query_keys(const SparseAttentionArgs& a, int64_t query) {
  QueryKeys k;
  k.query = query;
  k.seq = k.query / a.len;
  k.start = a.start[k.seq];
  k.position = k.start + k.query % a.len;
  k.slot = a.slots[k.seq];
  k.window_keys = min(static_cast<int64_t>(a.window), k.position + 1);
  k.compressed_keys = a.ratio == 0 ? 0 : (a.picks != nullptr ? a.num_picks : (k.position + 1) / a.ratio);
  return k;
}

}  // namespace deepinfer::model::cuda::attention
