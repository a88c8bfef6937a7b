#include "model/cuda/index_topk.h"

#include <climits>
#include <cub/block/block_scan.cuh>

#include "model/cuda/paged_entries.cuh"

namespace deepinfer::model::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kBins = 256;  // 8-bit digits, four passes

// Scores as unsigned integers in the same order (larger score, larger key); -0.0 as 0.0.
__device__ __forceinline__ uint32_t order_key(float score) {
  const uint32_t bits = __float_as_uint(score == 0.0f ? 0.0f : score);
  return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}

// Counts of one digit (bits shift .. shift + 7) of the keys whose higher bits equal `prefix`
// under `mask`, into hist_s. Lanes of a warp with the same digit add once (warp-aggregated).
__device__ void histogram(const float* row, int64_t entries, uint32_t prefix, uint32_t mask, int shift, int* hist_s) {
  const int lane = threadIdx.x % 32;
  for (int64_t base = 0; base < entries; base += kThreads) {
    const int64_t e = base + threadIdx.x;
    const uint32_t key = e < entries ? order_key(row[e]) : 0;
    const int digit = e < entries && (key & mask) == prefix ? static_cast<int>((key >> shift) & 0xffu) : -1;
    const unsigned same = __match_any_sync(0xffffffffu, digit);
    if (digit >= 0 && lane == __ffs(same) - 1) atomicAdd(&hist_s[digit], __popc(same));
  }
}

// Entry e of this block's row as a row of the paged entries (IndexTopkArgs::block_tables).
__device__ __forceinline__ int64_t entry_row(const IndexTopkArgs& a, int64_t e) {
  const int64_t seq = static_cast<int64_t>(blockIdx.x) / a.rows_per_seq;
  return paged_entry_row(a.block_tables, seq * a.block_stride, e, a.ratio);
}

// One block per row (blockIdx.x).
__global__ void __launch_bounds__(kThreads) index_topk_kernel(const IndexTopkArgs a) {
  using Scan = cub::BlockScan<int, kThreads>;
  __shared__ typename Scan::TempStorage scan_s;
  __shared__ int hist_s[kBins];
  __shared__ int visible_s, remaining_s;
  __shared__ uint32_t prefix_s;

  const float* row = a.scores + static_cast<int64_t>(blockIdx.x) * a.entries;
  int64_t* out = a.picks + static_cast<int64_t>(blockIdx.x) * a.k;
  const uint32_t not_visible = order_key(-INFINITY);
  const int k = static_cast<int>(a.k);

  if (threadIdx.x == 0) visible_s = 0;
  __syncthreads();
  int visible = 0;
  for (int64_t e = threadIdx.x; e < a.entries; e += kThreads) visible += order_key(row[e]) > not_visible;
  atomicAdd(&visible_s, visible);
  __syncthreads();

  // The picks: every key above `threshold`, then the first `ties` keys equal to it.
  uint32_t threshold = not_visible;
  int ties = 0;
  if (visible_s > k) {
    uint32_t prefix = 0, mask = 0;
    int remaining = k;  // picks still to find among the keys that match prefix under mask
    for (int shift = 24; shift >= 0; shift -= 8) {
      for (int i = threadIdx.x; i < kBins; i += kThreads) hist_s[i] = 0;
      __syncthreads();
      histogram(row, a.entries, prefix, mask, shift, hist_s);
      __syncthreads();
      if (threadIdx.x < 32) {
        // Lane l holds digits 255 - 8l .. 248 - 8l; the lane whose digits reach `remaining`,
        // counted from the top, finds the digit.
        const int lane = threadIdx.x;
        int local = 0;
        for (int j = 0; j < 8; ++j) local += hist_s[255 - 8 * lane - j];
        int upto = local;  // inclusive sum over lanes 0..lane
        for (int offset = 1; offset < 32; offset *= 2) {
          const int n = __shfl_up_sync(0xffffffffu, upto, offset);
          if (lane >= offset) upto += n;
        }
        int above = upto - local;
        if (above < remaining && remaining <= upto) {
          for (int j = 0; j < 8; ++j) {
            const int digit = 255 - 8 * lane - j;
            if (above + hist_s[digit] >= remaining) {
              prefix_s = prefix | (static_cast<uint32_t>(digit) << shift);
              remaining_s = remaining - above;
              break;
            }
            above += hist_s[digit];
          }
        }
      }
      __syncthreads();
      prefix = prefix_s;
      remaining = remaining_s;
      mask |= 0xffu << shift;
    }
    threshold = prefix;
    ties = remaining;
  }

  // In entry order, tile by tile: a pick's place is the number of picks before it.
  int taken = 0, ties_seen = 0;
  for (int64_t base = 0; base < a.entries && taken < k; base += kThreads) {
    const int64_t e = base + threadIdx.x;
    const uint32_t key = e < a.entries ? order_key(row[e]) : 0;
    const int tie = e < a.entries && key == threshold;
    int tie_rank = 0, tie_count = 0;
    Scan(scan_s).ExclusiveSum(tie, tie_rank, tie_count);
    const int take = (e < a.entries && key > threshold) || (tie && ties_seen + tie_rank < ties);
    __syncthreads();  // scan_s again
    int place = 0, take_count = 0;
    Scan(scan_s).ExclusiveSum(take, place, take_count);
    if (take) out[taken + place] = a.block_tables == nullptr ? e : entry_row(a, e);
    taken += take_count;
    ties_seen += tie_count;
    __syncthreads();
  }
  for (int j = taken + threadIdx.x; j < k; j += kThreads) out[j] = -1;
}

}  // namespace

cudaError_t index_topk(const IndexTopkArgs& a, cudaStream_t stream) {
  if (a.scores == nullptr || a.picks == nullptr || a.k < 1 || a.k > INT_MAX || a.rows < 0 || a.rows > INT_MAX || a.entries < 0 ||
      a.entries > INT_MAX) {
    return cudaErrorInvalidValue;
  }
  if (a.block_tables != nullptr &&
      (a.ratio < 1 || 128 % a.ratio != 0 || a.rows_per_seq < 1 || a.block_stride * (128 / a.ratio) < a.entries))
    return cudaErrorInvalidValue;
  if (a.rows == 0) return cudaSuccess;
  index_topk_kernel<<<static_cast<unsigned>(a.rows), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace deepinfer::model::cuda
