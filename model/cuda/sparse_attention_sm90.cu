#include "model/cuda/sparse_attention_sm90.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <vector>

#include "model/cuda/mma.cuh"
#include "model/cuda/sparse_attention_keys.cuh"
#include "model/cuda/wgmma.cuh"

namespace deepinfer::model::cuda {
namespace {

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
#ifndef DEEPINFER_SM90_TRACE
#define DEEPINFER_SM90_TRACE 0  // timing experiments only (kernel_micro.sh trace): per-block timestamps, sm90_trace_report()
#endif
// Rows of 2 splits merge in a cluster; more splits go through the merge kernel (a cluster of 4 was
// slower than the merge kernel on HCA at 128K, docs/kernel-notes.md).
constexpr int kMaxClusterSplits = 2;

struct Shared {
  static constexpr int kQ = 0, kK = kTileBytes, kP = 3 * kTileBytes, kRows = kP + kPBytes;
  static constexpr int kAlpha = kRows + kMaxSplitKeys * 8, kMax = kAlpha + kAllHeads * 4, kSum = kMax + kAllHeads * 4;
  static constexpr int kFull = kSum + kAllHeads * 4;   // the key buffers' mbarriers
  static constexpr int kBytes = kFull + 2 * 8 + 1024;  // and room to align the base to 1024
};

// The cluster of a row's splits (thread block clusters, sm_90; block split s is the cluster's
// rank s): a barrier of every thread of the cluster in two halves (release / acquire: shared-memory
// writes before the arrival are seen after the wait), the address in block `rank` of this block's
// shared memory at `local`, and stores there.
__device__ __forceinline__ void cluster_arrive() { asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void cluster_sync() {
  cluster_arrive();
  cluster_wait();
}
__device__ __forceinline__ uint32_t remote_address(const void* local, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(shared_address(local)), "r"(rank));
  return remote;
}
__device__ __forceinline__ void store_remote(uint32_t remote, float x, float y) {
  asm volatile("st.shared::cluster.v2.f32 [%0], {%1, %2};\n" ::"r"(remote), "f"(x), "f"(y) : "memory");
}
__device__ __forceinline__ void store_remote(uint32_t remote, float x, float y, float z, float w) {
  asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(remote), "f"(x), "f"(y), "f"(z), "f"(w) : "memory");
}

// Timing experiments: the first thread of each warpgroup stamps the SM clock and the global timer
// at numbered points of the kernel; sm90_trace_report() prints them. Points: 0 entry, 1 q and
// tile 0 copies issued, 4 + 4 t + {0 tile t's keys in, 1 its scores done (group 0), 2 P handed
// over, 3 P V done}, 60 tiles done, 61 and 62 the cluster's barriers, 63 exit.
#if DEEPINFER_SM90_TRACE
constexpr int kTracePoints = 64, kTraceBlocks = 1024;
__device__ unsigned long long trace_stamps[kTraceBlocks][2][kTracePoints][2];  // [block][group][point] {clock, ns}
#endif
__device__ __forceinline__ void trace(int point) {
#if DEEPINFER_SM90_TRACE
  const unsigned block = blockIdx.y * gridDim.x + blockIdx.x;
  if (threadIdx.x % 128 != 0 || block >= kTraceBlocks || point >= kTracePoints) return;
  unsigned long long ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns)::"memory");
  trace_stamps[block][threadIdx.x / 128][point][0] = clock64();
  trace_stamps[block][threadIdx.x / 128][point][1] = ns;
#endif
}

// The two warpgroups hand over through named barriers (bar.arrive by the one that gives, bar.sync
// by the one that waits): group 0's probabilities of a tile are in (kPReady), group 1 is done with
// them (kPFree), group 0 is done with a key buffer (kKeysFree).
constexpr int kPReady = 1, kPFree = 2, kKeysFree = 3;
template <int id>
__device__ __forceinline__ void sync_groups() {
  asm volatile("bar.sync %0, 256;\n" ::"n"(id) : "memory");
}
template <int id>
__device__ __forceinline__ void arrive_groups() {
  asm volatile("bar.arrive %0, 256;\n" ::"n"(id) : "memory");
}

// A key buffer's mbarrier: its phase completes once each of the `count` threads that copy a tile
// there has seen its copies land (cp.async.mbarrier.arrive.noinc after them).
__device__ __forceinline__ void init_barrier(uint64_t* barrier, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\nfence.mbarrier_init.release.cluster;\n" ::"r"(shared_address(barrier)), "r"(count)
               : "memory");
}
__device__ __forceinline__ void arrive_after_copies(uint64_t* barrier) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(shared_address(barrier)) : "memory");
}
__device__ __forceinline__ void wait_barrier(uint64_t* barrier, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred done;\n waiting:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n @!done bra waiting;\n}\n" ::"r"(
          shared_address(barrier)),
      "r"(parity)
      : "memory");
}

// Heads [first, end) of the split's share of the merge, `splits` shares of 64 heads.
__device__ __forceinline__ int share_begin(int split, int splits, int heads) { return split * heads / splits; }

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

// The same for heads 8 warp .. + 7 of the row's q (zeros past a.heads).
__device__ __forceinline__ void copy_q_strip(unsigned char* q_s, const SparseAttentionArgs& a, int64_t row, int warp, int lane) {
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int h = 8 * warp + j / 2, c = (j % 2) * 32 + lane;
    copy16_async(q_s + (c / 8) * kColumnTileBytes + swizzled_offset(h, c % 8), a.q + (row * a.heads + (h < a.heads ? h : 0)) * kD + c * 8,
                 h < a.heads);
  }
}

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
    rows_s[j] = entry_row<kD>(a, k, pick);
  } else {
    rows_s[j] = key_row<kD>(a, k, first_key + j);
  }
}

// Scores of the 64 heads and a tile's 64 keys (group 0): s = q k^T over the 512 dims, k16 steps in order.
__device__ __forceinline__ void score_tile(float (&s)[32], const unsigned char* q_s, const unsigned char* k_s) {
#pragma unroll
  for (int i = 0; i < 32; ++i) s[i] = 0.0f;
  wgmma_fence();
#pragma unroll
  for (int step = 0; step < (kSkip & 2 ? 0 : kD / 16); ++step) {
    const int offset = (step / 4) * kColumnTileBytes + (step % 4) * 32;
    wgmma_m64n64k16_ss(s, wgmma_descriptor(q_s + offset, 16, 1024), wgmma_descriptor(k_s + offset, 16, 1024));
  }
  wgmma_commit();
  wgmma_wait<0>();
  wgmma_settle(s);
}

// The running softmax of this thread's two heads (group 0), in log2 units.
struct RunningSoftmax {
  float max[2] = {-INFINITY, -INFINITY};
  float sum[2] = {0.0f, 0.0f};
};

// Group 0's online softmax step over one tile of scores (heads r0, r1, keys 8 j + 2 quad + {0, 1}):
// missing keys masked, the running max and sum updated, the probabilities as bfloat16 into pa (the
// A operand of this group's P V, k16 step t: keys 16 t ..) and p_s (the other group's); alpha, the
// factor of the earlier tiles, out.
__device__ __forceinline__ void softmax_tile(float (&s)[32], const __nv_bfloat16* const* tile_rows, float scale, RunningSoftmax& run,
                                             uint32_t (&pa)[4][4], unsigned char* p_s, float (&alpha)[2], int r0, int r1, int quad) {
  float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int j = 0; j < 8; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const bool valid = tile_rows[8 * j + 2 * quad + e] != nullptr;
      s[4 * j + e] = valid ? s[4 * j + e] * scale : -INFINITY;
      s[4 * j + 2 + e] = valid ? s[4 * j + 2 + e] * scale : -INFINITY;
      tile_max[0] = fmaxf(tile_max[0], s[4 * j + e]);
      tile_max[1] = fmaxf(tile_max[1], s[4 * j + 2 + e]);
    }
  }
  float base[2], p_sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
    const float m = fmaxf(run.max[r], tile_max[r]);
    base[r] = m == -INFINITY ? 0.0f : m;  // no valid key yet: every p is 0
    alpha[r] = exp2f(run.max[r] - base[r]);
    run.max[r] = m;
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float p0 = exp2f(s[4 * j + 2 * r] - base[r]), p1 = exp2f(s[4 * j + 2 * r + 1] - base[r]);
      p_sum[r] += p0 + p1;
      const __nv_bfloat162 pair = __floats2bfloat162_rn(p0, p1);
      const uint32_t bits = *reinterpret_cast<const uint32_t*>(&pair);
      pa[j / 2][(j % 2) * 2 + r] = bits;
      *reinterpret_cast<uint32_t*>(p_s + swizzled_offset(r == 0 ? r0 : r1, j) + 4 * quad) = bits;
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    p_sum[r] += __shfl_xor_sync(0xffffffffu, p_sum[r], 1);
    p_sum[r] += __shfl_xor_sync(0xffffffffu, p_sum[r], 2);
    run.sum[r] = run.sum[r] * alpha[r] + p_sum[r];
  }
}

// The earlier tiles' share of the output, scaled to this tile's running max (heads r0, r1).
__device__ __forceinline__ void rescale(float (&acc)[128], float alpha0, float alpha1) {
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    acc[4 * j] *= alpha0;
    acc[4 * j + 1] *= alpha0;
    acc[4 * j + 2] *= alpha1;
    acc[4 * j + 3] *= alpha1;
  }
}

// acc (64 heads x the group's 256 dims) += P V over the tile's 64 keys (V = the key tile read
// MN-major), issued, not waited for: group 0 with P from registers (dims 0..255), group 1 with P
// from shared memory (dims 256..511).
__device__ __forceinline__ void add_pv_from_registers(float (&acc)[128], const uint32_t (&pa)[4][4], const unsigned char* k_s) {
  wgmma_fence();
#pragma unroll
  for (int t = 0; t < (kSkip & 4 ? 0 : 4); ++t) wgmma_m64n256k16_rs(acc, pa[t], wgmma_descriptor(k_s + t * 2048, kColumnTileBytes, 1024));
}
__device__ __forceinline__ void add_pv_from_shared(float (&acc)[128], const unsigned char* p_s, const unsigned char* k_s) {
  wgmma_fence();
#pragma unroll
  for (int t = 0; t < (kSkip & 4 ? 0 : 4); ++t) {
    wgmma_m64n256k16_ss(acc, wgmma_descriptor(p_s + t * 32, 16, 1024),
                        wgmma_descriptor(k_s + 4 * kColumnTileBytes + t * 2048, kColumnTileBytes, 1024));
  }
}

// What one thread holds of its block's split: heads r0, r1 (rows of the accumulators), dims d0 + 8 j + {0, 1}.
struct Part {
  int r0, r1, d0, quad, group;
};

// Output rows go through shared memory, bf16 pairs in from the accumulator layout (a row pitch of
// kD * 2 + 16 bytes keeps a warp's pairs in distinct banks), then 16 bytes a thread to device
// memory, a warp's stores contiguous: `heads` rows from `out`.
constexpr int kStagePitch = kD * 2 + 16;
__device__ __forceinline__ void stage_pair(unsigned char* stage, int head, int dim, float x, float y) {
  *reinterpret_cast<__nv_bfloat162*>(stage + head * kStagePitch + dim * 2) = __floats2bfloat162_rn(x, y);
}
__device__ __forceinline__ void write_staged(const unsigned char* stage, __nv_bfloat16* out, int heads) {
  __syncthreads();  // every pair is in
  for (int i = threadIdx.x; i < heads * (kD / 8); i += kThreads) {
    const int h = i / (kD / 8), c = i % (kD / 8);
    *reinterpret_cast<uint4*>(out + h * kD + c * 8) = *reinterpret_cast<const uint4*>(stage + h * kStagePitch + c * 16);
  }
}

// A row of one split: its output, the sink joining the denominator (softmax over [scores, sink]),
// staged where q was.
__device__ __forceinline__ void write_output(const SparseAttentionArgs& a, int64_t row, const float (&acc)[128], const float* max_s,
                                             const float* sum_s, unsigned char* stage, const Part& p) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int h = r == 0 ? p.r0 : p.r1;
    if (h >= a.heads) continue;
    const float m_row = max_s[h], l_row = sum_s[h];
    const float sink = a.sink[h] * kLog2e;
    const float m = fmaxf(m_row, sink);
    const float kept = exp2f(m_row - m);
    const float factor = kept / (l_row * kept + exp2f(sink - m));
#pragma unroll
    for (int j = 0; j < 32; ++j) stage_pair(stage, h, p.d0 + 8 * j, acc[4 * j + 2 * r] * factor, acc[4 * j + 2 * r + 1] * factor);
  }
  write_staged(stage, a.out + row * a.heads * kD, a.heads);
}

// Thread t's head r (0, 1) and first dim in the accumulator layout (Part of thread t).
__device__ __forceinline__ int head_of(int t, int r) { return 16 * ((t / 32) % 4) + (t % 32) / 4 + 8 * r; }
__device__ __forceinline__ int dim_of(int t) { return (t / 128) * (kD / 2) + 2 * (t % 4); }

// The factors of a head's two partials and of their sum in the merge of combine_kernel
// (sparse_attention.cu), term for term: `first`, `second` the (max, sum) of splits 0 and 1.
struct MergeFactors {
  float w0, w1, inv;
};
__device__ __forceinline__ MergeFactors merge_factors(float sink, float2 first, float2 second) {
  float m = sink * kLog2e;
  m = fmaxf(m, first.x);
  m = fmaxf(m, second.x);
  float denominator = exp2f(sink * kLog2e - m);
  const float w0 = exp2f(first.x - m);  // 0 for a split without a valid key (max -inf)
  denominator += first.y * w0;
  const float w1 = exp2f(second.x - m);
  denominator += second.y * w1;
  return {w0, w1, 1.0f / denominator};
}

// Four merged outputs of one head from the two splits' float4 of [j / 2][r][thread] (dims d, d + 1,
// d + 8, d + 9): out at d and d + 8.
__device__ __forceinline__ void merge_float4(__nv_bfloat16* out, float4 x0, float4 x1, const MergeFactors& f) {
  const float v0[4] = {x0.x, x0.y, x0.z, x0.w}, v1[4] = {x1.x, x1.y, x1.z, x1.w};
  float o[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    o[e] = 0.0f;
    o[e] += v0[e] * f.w0;
    o[e] += v1[e] * f.w1;
  }
  *reinterpret_cast<__nv_bfloat162*>(out) = __floats2bfloat162_rn(o[0] * f.inv, o[1] * f.inv);
  *reinterpret_cast<__nv_bfloat162*>(out + 8) = __floats2bfloat162_rn(o[2] * f.inv, o[3] * f.inv);
}

// A row of two splits merged in its cluster. Head h belongs to the split of its share (heads below
// share_begin(1, 2, heads) to split 0). The other split sends its partial of h, to the owner's
// threads of the same index (they hold the same heads and dims), into the space q and the key tiles
// held: [j / 2][r][thread] float4 (dims 8 j + 2 quad + {0, 1} and j + 1's of head r), and its
// (max, sum) of h. Then every thread of the owner merges in split order: thread t its own j < 16
// from registers and thread t ^ 64's j >= 16, which t ^ 64 left in the second key buffer (so the
// threads that sent have work too). Every block of the cluster calls it once it has arrived at
// the cluster barrier after its tiles, `active` or not.
__device__ void merge_pair(const SparseAttentionArgs& a, int64_t row, int split, int splits, bool active, unsigned char* shared,
                           const float (&acc)[128], const float* max_s, const float* sum_s, const Part& p) {
  static_assert(kMaxClusterSplits == 2, "a cluster merges two splits");
  float4* received = reinterpret_cast<float4*>(shared);
  float4* kept = reinterpret_cast<float4*>(shared + Shared::kK + kTileBytes);  // [j / 2 - 8][r][thread]
  float2* received_stats = reinterpret_cast<float2*>(shared + Shared::kRows);  // [head]
  const bool pair = splits == 2 && active;
  const int boundary = share_begin(1, 2, a.heads);
  const auto owned = [&](int h) { return h < a.heads && (h < boundary ? 0 : 1) == split; };
  const int partner = threadIdx.x ^ 64;
  float sink[2][2];  // [own, partner's][r]
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    sink[0][r] = pair ? a.sink[min(head_of(threadIdx.x, r), a.heads - 1)] : 0.0f;
    sink[1][r] = pair ? a.sink[min(head_of(partner, r), a.heads - 1)] : 0.0f;
  }
  cluster_wait();  // the other block is done with its tiles
  trace(61);
  if (pair) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int h = r == 0 ? p.r0 : p.r1;
      if (owned(h)) {
#pragma unroll
        for (int jj = 8; jj < 16; ++jj)
          kept[((jj - 8) * 2 + r) * kThreads + threadIdx.x] =
              make_float4(acc[8 * jj + 2 * r], acc[8 * jj + 2 * r + 1], acc[8 * jj + 4 + 2 * r], acc[8 * jj + 5 + 2 * r]);
      } else if (h < a.heads) {
        const uint32_t dst = remote_address(received + r * kThreads + threadIdx.x, 1 - split);
#pragma unroll
        for (int jj = 0; jj < 16; ++jj)
          store_remote(dst + jj * 2 * kThreads * 16, acc[8 * jj + 2 * r], acc[8 * jj + 2 * r + 1], acc[8 * jj + 4 + 2 * r],
                       acc[8 * jj + 5 + 2 * r]);
        if (p.group == 0 && p.quad == 0) store_remote(remote_address(received_stats + h, 1 - split), max_s[h], sum_s[h]);
      }
    }
  }
  cluster_sync();  // every partial is in, and the kept ones
  trace(62);
  if (!pair) return;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int t = half == 0 ? static_cast<int>(threadIdx.x) : partner;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int h = head_of(t, r);
      if (!owned(h)) continue;
      const float2 own = make_float2(max_s[h], sum_s[h]), other = received_stats[h];
      const MergeFactors f = merge_factors(sink[half][r], split == 0 ? own : other, split == 0 ? other : own);
      __nv_bfloat16* out = a.out + (row * a.heads + h) * kD + dim_of(t);
#pragma unroll
      for (int jj = 8 * half; jj < 8 * half + 8; ++jj) {
        const float4 mine =
            half == 0 ? make_float4(acc[8 * jj + 2 * r], acc[8 * jj + 2 * r + 1], acc[8 * jj + 4 + 2 * r], acc[8 * jj + 5 + 2 * r])
                      : kept[((jj - 8) * 2 + r) * kThreads + t];
        const float4 theirs = received[(jj * 2 + r) * kThreads + t];
        merge_float4(out + 16 * jj, split == 0 ? mine : theirs, split == 0 ? theirs : mine, f);
      }
    }
  }
}

// A row of several splits merged by combine_kernel (sparse_attention.cu): this split's partials
// and (max, sum) into a.workspace.
__device__ __forceinline__ void write_partials(const SparseAttentionArgs& a, int64_t max_splits, int64_t split, const float (&acc)[128],
                                               const float* max_s, const float* sum_s, const Part& p) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int h = r == 0 ? p.r0 : p.r1;
    if (h >= a.heads) continue;
    const int64_t part = (static_cast<int64_t>(blockIdx.x) * max_splits + split) * a.heads + h;  // this launch's row
    float* out = a.workspace + part * kD + p.d0;
#pragma unroll
    for (int j = 0; j < 32; ++j) *reinterpret_cast<float2*>(out + 8 * j) = make_float2(acc[4 * j + 2 * r], acc[4 * j + 2 * r + 1]);
    if (p.group == 0 && p.quad == 0) {
      float* stats = a.workspace + static_cast<int64_t>(gridDim.x) * max_splits * a.heads * kD;
      stats[2 * part] = max_s[h];
      stats[2 * part + 1] = sum_s[h];
    }
  }
}

template <bool kCluster>
__global__ void __launch_bounds__(kThreads, 1) sm90_split_kernel(const SparseAttentionArgs a, int64_t max_splits) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char shared_raw[];
  unsigned char* shared = shared_raw + ((1024 - (shared_address(shared_raw) & 1023)) & 1023);
  unsigned char* q_s = shared + Shared::kQ;
  unsigned char* p_s = shared + Shared::kP;
  const __nv_bfloat16** rows_s = reinterpret_cast<const __nv_bfloat16**>(shared + Shared::kRows);
  float* alpha_s = reinterpret_cast<float*>(shared + Shared::kAlpha);
  float* max_s = reinterpret_cast<float*>(shared + Shared::kMax);
  float* sum_s = reinterpret_cast<float*>(shared + Shared::kSum);
  uint64_t* full_s = reinterpret_cast<uint64_t*>(shared + Shared::kFull);  // [buffer]
  trace(0);

  const int block_warp = threadIdx.x / 32;
  const int64_t pick = pick_ahead(a, a.first_query + blockIdx.x, blockIdx.y, block_warp, threadIdx.x % 32);  // with query_keys' reads
  const QueryKeys k = query_keys(a, a.first_query + blockIdx.x);
  const int64_t num_keys = k.window_keys + k.compressed_keys, splits = splits_of(num_keys), per_split = split_keys_of(num_keys);
  const int64_t split = blockIdx.y;
  // A cluster's blocks all reach its barriers, a block past the row's splits without work.
  const bool active = split < splits;
  if (!kCluster && !active) return;
  const int64_t first_key = split * per_split;
  const int split_keys = active ? static_cast<int>(min(num_keys - first_key, per_split)) : 0;
  const int tiles = (split_keys + kKeys - 1) / kKeys;
  const int64_t row = a.query_rows[k.query];
  const int group = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, quad = lane % 4;
  const Part part{16 * warp + lane / 4, 16 * warp + lane / 4 + 8, group * (kD / 2) + 2 * quad, quad, group};

  // q and tile 0 go out before the later tiles' keys are looked up, each warp copying the rows it
  // looked up (no block barrier stands before the copies); group 1 copies the later tiles.
  if (threadIdx.x == 0) {
    init_barrier(&full_s[0], 128);
    init_barrier(&full_s[1], 128);
  }
  if (active) copy_q_strip(q_s, a, row, block_warp, lane);
  find_first_rows(rows_s, a, k, first_key, split_keys, min(tiles, 4), pick, block_warp, lane);
  __syncwarp();
  unsigned char* keys_s = shared + Shared::kK;
  if (tiles > 0) copy_strip(keys_s, rows_s, a.q, block_warp, lane);
  commit_copies();  // q and tile 0
  trace(1);
  find_rows(rows_s, a, k, first_key, split_keys, 4, tiles, block_warp, lane);

  RunningSoftmax run;  // group 0
  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
  const float scale = a.scale * kLog2e;
  wait_copies<0>();
  fence_async_shared();  // the copies' writes, for the tensor cores' reads
  __syncthreads();       // q, tile 0 and every rows_s entry are in, the barriers set up
  for (int tile = 0; tile < tiles; ++tile) {
    unsigned char* k_s = keys_s + (tile % 2) * kTileBytes;
    const bool refill = tile + 1 < tiles;  // the other buffer takes the next tile, once both groups are done with it
    if (group == 1) {
      if (tile > 0) {
        if (refill) sync_groups<kKeysFree>();
        arrive_groups<kPFree>();
      }
      if (refill) {
        unsigned char* next = keys_s + ((tile + 1) % 2) * kTileBytes;
        if (!(kSkip & 1)) {
          copy_strip(next, rows_s + (tile + 1) * kKeys, a.q, warp, lane);
          copy_strip(next, rows_s + (tile + 1) * kKeys, a.q, warp + 4, lane);
        }
        arrive_after_copies(&full_s[(tile + 1) % 2]);
      }
    }
    if (group == 0 && tile > 0 && refill) arrive_groups<kKeysFree>();
    if (tile > 0) wait_barrier(&full_s[tile % 2], ((tile - 1) / 2) & 1);  // tile t > 0 is the ((t - 1) / 2)-th in its buffer
    trace(4 + 4 * tile);
    if (group == 0) {
      float s[32];
      score_tile(s, q_s, k_s);
      trace(5 + 4 * tile);
      if (tile > 0) sync_groups<kPFree>();
      uint32_t pa[4][4];
      float alpha[2];
      softmax_tile(s, rows_s + tile * kKeys, scale, run, pa, p_s, alpha, part.r0, part.r1, quad);
      if (quad == 0) {
        alpha_s[part.r0] = alpha[0];
        alpha_s[part.r1] = alpha[1];
      }
      fence_async_shared();  // P's writes, for the other group's tensor-core reads
      arrive_groups<kPReady>();
      trace(6 + 4 * tile);
      rescale(acc, alpha[0], alpha[1]);
      add_pv_from_registers(acc, pa, k_s);
    } else {
      sync_groups<kPReady>();
      trace(6 + 4 * tile);
      rescale(acc, alpha_s[part.r0], alpha_s[part.r1]);
      add_pv_from_shared(acc, p_s, k_s);
    }
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_settle(acc);
    trace(7 + 4 * tile);
  }
  trace(60);
  if constexpr (kCluster) cluster_arrive();  // done with q and the key tiles: the other block may write there

  // Group 0's running max and sum, for both groups.
  if (group == 0 && quad == 0) {
    max_s[part.r0] = run.max[0];
    max_s[part.r1] = run.max[1];
    sum_s[part.r0] = run.sum[0];
    sum_s[part.r1] = run.sum[1];
  }
  __syncthreads();
  if (splits == 1 && active) write_output(a, row, acc, max_s, sum_s, shared, part);
  if constexpr (kCluster) {
    merge_pair(a, row, static_cast<int>(split), static_cast<int>(splits), active, shared, acc, max_s, sum_s, part);
  } else if (splits > 1) {
    write_partials(a, max_splits, split, acc, max_s, sum_s, part);
  }
  trace(63);
#else
  __trap();  // built without sm_90a: sm90_attention_supported() keeps this from running
#endif
}

// Whether the current device is compute capability 9.0 with room for the kernel's shared memory,
// asked once per device.
bool device_runs_kernel() {
  constexpr int kDevices = 64;
  static std::atomic<int> known[kDevices];  // 0 not asked, 1 yes, 2 no
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kDevices) return false;
  if (const int seen = known[device].load(std::memory_order_relaxed); seen != 0) return seen == 1;
  int major = 0, minor = 0, optin = 0;
  const bool yes = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
                   cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess && major == 9 && minor == 0 &&
                   cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) == cudaSuccess &&
                   Shared::kBytes <= optin;
  known[device].store(yes ? 1 : 2, std::memory_order_relaxed);
  return yes;
}

}  // namespace

#if DEEPINFER_SM90_TRACE
// The last launch's stamps: each point's median and largest time after its block's entry (the SM
// clock, converted at the rate the global timer shows), and the launch's span by the global timer.
void sm90_trace_report() {
  std::vector<unsigned long long> t(size_t{kTraceBlocks} * 2 * kTracePoints * 2);
  if (cudaMemcpyFromSymbol(t.data(), trace_stamps, t.size() * 8) != cudaSuccess) return;
  const auto at = [&](int b, int g, int p, int i) { return t[((size_t(b) * 2 + g) * kTracePoints + p) * 2 + i]; };
  unsigned long long first = ~0ull, last = 0, last_entry = 0;
  double ghz = 0;
  int blocks = 0;
  for (int b = 0; b < kTraceBlocks; ++b) {
    if (at(b, 0, 0, 1) == 0 || at(b, 0, 63, 1) == 0) continue;
    first = std::min(first, at(b, 0, 0, 1));
    last_entry = std::max(last_entry, at(b, 0, 0, 1));
    last = std::max(last, at(b, 0, 63, 1));
    ghz += double(at(b, 0, 63, 0) - at(b, 0, 0, 0)) / double(at(b, 0, 63, 1) - at(b, 0, 0, 1));
    ++blocks;
  }
  if (blocks == 0) return;
  ghz /= blocks;
  std::printf("  trace: %d blocks, span %.2f us (entries spread over %.2f us), SM clock %.2f GHz\n", blocks, (last - first) * 1e-3,
              (last_entry - first) * 1e-3, ghz);
  for (int p = 1; p < kTracePoints; ++p) {
    std::vector<double> us[2];
    for (int g = 0; g < 2; ++g) {
      for (int b = 0; b < kTraceBlocks; ++b)
        if (at(b, 0, 0, 1) != 0 && at(b, 0, 63, 1) != 0 && at(b, g, p, 0) != 0)
          us[g].push_back(double(at(b, g, p, 0) - at(b, 0, 0, 0)) / ghz * 1e-3);
      std::sort(us[g].begin(), us[g].end());
    }
    if (us[0].empty() && us[1].empty()) continue;
    std::printf("  trace point %2d:", p);
    for (int g = 0; g < 2; ++g)
      if (!us[g].empty()) std::printf("  group %d median %6.2f max %6.2f us (%zu)", g, us[g][us[g].size() / 2], us[g].back(), us[g].size());
    std::printf("\n");
  }
}
#endif

bool sm90_attention_supported(const SparseAttentionArgs& a) {
  return a.head_dim == kD && a.heads > 32 && a.heads <= kAllHeads && device_runs_kernel();
}

bool sm90_attention_merges(int64_t max_splits) { return max_splits > 1 && max_splits <= kMaxClusterSplits; }

cudaError_t sm90_split_attention(const SparseAttentionArgs& a, int64_t max_splits, unsigned rows, cudaStream_t stream) {
  const dim3 grid(rows, static_cast<unsigned>(max_splits));
  if (!sm90_attention_merges(max_splits))
    return launch_with_shared(sm90_split_kernel<false>, grid, kThreads, Shared::kBytes, stream, a, max_splits);
  const cudaError_t configured = cudaFuncSetAttribute(sm90_split_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, Shared::kBytes);
  if (configured != cudaSuccess) return configured;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = Shared::kBytes;
  config.stream = stream;
  cudaLaunchAttribute cluster;
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = 1;
  cluster.val.clusterDim.y = static_cast<unsigned>(max_splits);
  cluster.val.clusterDim.z = 1;
  config.attrs = &cluster;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, sm90_split_kernel<true>, a, max_splits);
}

}  // namespace deepinfer::model::cuda
