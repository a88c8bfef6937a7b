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
  static constexpr int kBytes = kSum + kAllHeads * 4 + 1024;  // and room to align the base to 1024
};

// The cluster of a row's splits (thread block clusters, sm_90; block split s is the cluster's
// rank s): a barrier of every thread of the cluster (release / acquire: shared-memory writes
// before it are seen after it), and a float2 store into another block's shared memory.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void store_remote(const void* local, uint32_t rank, float x, float y) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(shared_address(local)), "r"(rank));
  asm volatile("st.shared::cluster.v2.f32 [%0], {%1, %2};\n" ::"r"(remote), "f"(x), "f"(y) : "memory");
}

// Timing experiments: the first thread of each warpgroup stamps the SM clock and the global timer
// at numbered points of the kernel; sm90_trace_report() prints them. Points: 0 entry, 1 the
// prologue's pointers written, 4 + 4 t + {0 tile t's keys in, 1 scores done (group 1: P handed
// over), 2 P handed over, 3 P V done}, 60 tiles done, 61 and 62 the cluster's barriers, 63 exit.
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

// Heads [first, end) of the split's share of the merge, `splits` shares of 64 heads.
__device__ __forceinline__ int share_begin(int split, int splits, int heads) { return split * heads / splits; }

// Rows `rows` (64 of them, null: zero) of 512 bfloat16 into a swizzled tile: thread i copies 16 of
// the 4096 16-byte chunks.
__device__ void load_rows(unsigned char* tile, const __nv_bfloat16* const* rows, const __nv_bfloat16* fallback) {
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int i = threadIdx.x + j * kThreads, row = i / 64, c = i % 64;
    const __nv_bfloat16* src = rows[row];
    copy16_async(tile + (c / 8) * kColumnTileBytes + swizzled_offset(row, c % 8), src != nullptr ? src + c * 8 : fallback, src != nullptr);
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
  trace(0);

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
  const int r0 = 16 * warp + lane / 4, r1 = r0 + 8;  // this thread's two heads

  if (active) {  // q first (its rows need no lookup), then the keys' rows
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int i = threadIdx.x + j * kThreads, h = i / 64, c = i % 64;
      copy16_async(q_s + (c / 8) * kColumnTileBytes + swizzled_offset(h, c % 8), a.q + (row * a.heads + (h < a.heads ? h : 0)) * kD + c * 8,
                   h < a.heads);
    }
  }
  for (int j = threadIdx.x; j < tiles * kKeys; j += kThreads) rows_s[j] = j < split_keys ? key_row<kD>(a, k, first_key + j) : nullptr;
  __syncthreads();
  trace(1);
  if (tiles > 0) load_rows(shared + Shared::kK, rows_s, a.q);
  commit_copies();

  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};  // group 0: heads r0, r1
  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
  const float scale = a.scale * kLog2e;
  for (int tile = 0; tile < tiles; ++tile) {
    wait_copies<0>();
    fence_async_shared();  // the copies' writes, for the tensor cores' reads
    __syncthreads();       // tile `tile` is in for everyone; both groups are done with tile - 1
    trace(4 + 4 * tile);
    unsigned char* k_s = shared + Shared::kK + (tile % 2) * kTileBytes;
    if (!(kSkip & 1) && tile + 1 < tiles) load_rows(shared + Shared::kK + ((tile + 1) % 2) * kTileBytes, rows_s + (tile + 1) * kKeys, a.q);
    commit_copies();
    const __nv_bfloat16* const* tile_rows = rows_s + tile * kKeys;
    if (group == 0) {
      // Scores of the 64 heads and 64 keys, then the online softmax in log2 units.
      float s[32];
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
      trace(5 + 4 * tile);
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
      float base[2], alpha[2], p_sum[2] = {0.0f, 0.0f};
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
        tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
        const float m = fmaxf(m_run[r], tile_max[r]);
        base[r] = m == -INFINITY ? 0.0f : m;  // no valid key yet: every p is 0
        alpha[r] = exp2f(m_run[r] - base[r]);
        m_run[r] = m;
      }
      uint32_t pa[4][4];  // the probabilities as the A operand of P V, k16 step t: keys 16 t ..
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
        l_run[r] = l_run[r] * alpha[r] + p_sum[r];
      }
      if (quad == 0) {
        alpha_s[r0] = alpha[0];
        alpha_s[r1] = alpha[1];
      }
      fence_async_shared();                             // P's writes, for the other group's tensor-core reads
      asm volatile("bar.sync 1, 256;\n" ::: "memory");  // P and alpha are in
      trace(6 + 4 * tile);
#pragma unroll
      for (int j = 0; j < 32; ++j) {
        acc[4 * j] *= alpha[0];
        acc[4 * j + 1] *= alpha[0];
        acc[4 * j + 2] *= alpha[1];
        acc[4 * j + 3] *= alpha[1];
      }
      wgmma_fence();
#pragma unroll
      for (int t = 0; t < (kSkip & 4 ? 0 : 4); ++t)
        wgmma_m64n256k16_rs(acc, pa[t], wgmma_descriptor(k_s + t * 2048, kColumnTileBytes, 1024));
    } else {
      asm volatile("bar.sync 1, 256;\n" ::: "memory");
      trace(6 + 4 * tile);
      const float alpha0 = alpha_s[r0], alpha1 = alpha_s[r1];
#pragma unroll
      for (int j = 0; j < 32; ++j) {
        acc[4 * j] *= alpha0;
        acc[4 * j + 1] *= alpha0;
        acc[4 * j + 2] *= alpha1;
        acc[4 * j + 3] *= alpha1;
      }
      wgmma_fence();
#pragma unroll
      for (int t = 0; t < (kSkip & 4 ? 0 : 4); ++t) {
        wgmma_m64n256k16_ss(acc, wgmma_descriptor(p_s + t * 32, 16, 1024),
                            wgmma_descriptor(k_s + 4 * kColumnTileBytes + t * 2048, kColumnTileBytes, 1024));
      }
    }
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_settle(acc);
    trace(7 + 4 * tile);
  }
  trace(60);

  // Group 0's running max and sum, for both groups.
  if (group == 0 && quad == 0) {
    max_s[r0] = m_run[0];
    max_s[r1] = m_run[1];
    sum_s[r0] = l_run[0];
    sum_s[r1] = l_run[1];
  }
  __syncthreads();
  const int d0 = group * (kD / 2) + 2 * quad;
  if (splits == 1 && active) {  // the sink joins the denominator: softmax over [scores, sink]
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int h = r == 0 ? r0 : r1;
      if (h >= a.heads) continue;
      const float m_row = max_s[h], l_row = sum_s[h];
      const float sink = a.sink[h] * kLog2e;
      const float m = fmaxf(m_row, sink);
      const float kept = exp2f(m_row - m);
      const float factor = kept / (l_row * kept + exp2f(sink - m));
      __nv_bfloat16* out = a.out + (row * a.heads + h) * kD + d0;
#pragma unroll
      for (int j = 0; j < 32; ++j)
        *reinterpret_cast<__nv_bfloat162*>(out + 8 * j) =
            __floats2bfloat162_rn(acc[4 * j + 2 * r] * factor, acc[4 * j + 2 * r + 1] * factor);
    }
  }
  if constexpr (kCluster) {
    // Each split sends its partial of every head to the split that merges that head (its share of
    // the heads), into the space q and the key tiles held: [split][head of the share][D] float32 and
    // [split][head of the share] (max, sum). Then each merges its share in split order.
    const int n = static_cast<int>(splits), share = (a.heads + n - 1) / n;
    float* received = reinterpret_cast<float*>(shared);
    float* received_stats = reinterpret_cast<float*>(shared + Shared::kRows);
    cluster_sync();  // every block of the cluster is done with its tiles
    trace(61);
    if (n > 1 && active) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int h = r == 0 ? r0 : r1;
        if (h >= a.heads) continue;
        int owner = 0;
        while (share_begin(owner + 1, n, a.heads) <= h) ++owner;
        const int slot = static_cast<int>(split) * share + (h - share_begin(owner, n, a.heads));
        float* dst = received + static_cast<int64_t>(slot) * kD + d0;
#pragma unroll
        for (int j = 0; j < 32; ++j) store_remote(dst + 8 * j, owner, acc[4 * j + 2 * r], acc[4 * j + 2 * r + 1]);
        if (group == 0 && quad == 0) store_remote(received_stats + 2 * slot, owner, max_s[h], sum_s[h]);
      }
    }
    cluster_sync();  // every share is in
    trace(62);
    if (n > 1 && active) {
      const int begin = share_begin(static_cast<int>(split), n, a.heads), end = share_begin(static_cast<int>(split) + 1, n, a.heads);
      for (int i = threadIdx.x; i < (end - begin) * (kD / 4); i += kThreads) {
        const int local = i / (kD / 4), t = i % (kD / 4), h = begin + local;
        float m = a.sink[h] * kLog2e;  // the merge of combine_kernel (sparse_attention.cu), term for term
        for (int s2 = 0; s2 < n; ++s2) m = fmaxf(m, received_stats[2 * (s2 * share + local)]);
        float denominator = exp2f(a.sink[h] * kLog2e - m);
        float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        for (int s2 = 0; s2 < n; ++s2) {
          const int slot = s2 * share + local;
          const float weight = exp2f(received_stats[2 * slot] - m);  // 0 for a split without a valid key (max -inf)
          denominator += received_stats[2 * slot + 1] * weight;
          const float4 v = reinterpret_cast<const float4*>(received + static_cast<int64_t>(slot) * kD)[t];
          o.x += v.x * weight;
          o.y += v.y * weight;
          o.z += v.z * weight;
          o.w += v.w * weight;
        }
        const float inv = 1.0f / denominator;
        __nv_bfloat16* out = a.out + (row * a.heads + h) * kD + 4 * t;
        reinterpret_cast<__nv_bfloat162*>(out)[0] = __floats2bfloat162_rn(o.x * inv, o.y * inv);
        reinterpret_cast<__nv_bfloat162*>(out)[1] = __floats2bfloat162_rn(o.z * inv, o.w * inv);
      }
    }
  } else if (splits > 1) {  // partials for combine_kernel
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int h = r == 0 ? r0 : r1;
      if (h >= a.heads) continue;
      const int64_t part = (static_cast<int64_t>(blockIdx.x) * max_splits + split) * a.heads + h;  // this launch's row
      float* out = a.workspace + part * kD + d0;
#pragma unroll
      for (int j = 0; j < 32; ++j) *reinterpret_cast<float2*>(out + 8 * j) = make_float2(acc[4 * j + 2 * r], acc[4 * j + 2 * r + 1]);
      if (group == 0 && quad == 0) {
        float* stats = a.workspace + static_cast<int64_t>(gridDim.x) * max_splits * a.heads * kD;
        stats[2 * part] = max_s[h];
        stats[2 * part + 1] = sum_s[h];
      }
    }
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
  for (int g = 0; g < 2; ++g) {
    for (int p = 1; p < kTracePoints; ++p) {
      std::vector<double> us;
      for (int b = 0; b < kTraceBlocks; ++b) {
        if (at(b, 0, 0, 1) == 0 || at(b, 0, 63, 1) == 0 || at(b, g, p, 0) == 0) continue;
        us.push_back(double(at(b, g, p, 0) - at(b, 0, 0, 0)) / ghz * 1e-3);
      }
      if (us.empty()) continue;
      std::vector<double> sorted = us;
      std::sort(sorted.begin(), sorted.end());
      std::printf("  trace group %d point %2d: median %6.2f us, max %6.2f us after entry (%zu blocks)\n", g, p, sorted[sorted.size() / 2],
                  sorted.back(), us.size());
    }
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
