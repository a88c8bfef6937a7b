// The float32 batch-invariant GEMM of dense_gemm.h (the router, the mHC projections, the
// invariant RMSNorm's sums of squares), on CUDA cores.
// Per element: K is cut into S = ceil(K / 512) ranges of 512 values (the last may hold fewer), a
// function of K alone. Range s's partial p_s is one sequential fma chain in k order starting
// from 0 (p = fma(x_k, w_k, p), __fmaf_rn: nothing contracted or reassociated); the element is
// ((p_0 + p_1) + p_2) + ... + p_{S-1} (__fadd_rn, in range order). M never changes S, the ranges or
// the chains, so a row's bits do not depend on the batch.
// Two kernels run it:
//  - ranges: a block of 128 threads per (tile of BM tokens x BN features, range); the range's
//    k values stream through a ring of 3..8 shared-memory stages of 16 (cp.async, all but one
//    in flight), and each thread runs one chain per element of its TM x TN register tile, four k at
//    a time from 16-byte reads; the chain's end goes to y when S = 1, else to the float32
//    workspace [S][M][N];
//  - sum_ranges: one thread per element adds the S partials in order.
// The tile (TM, TN) is chosen from M and N for speed; every tile runs the same chains, so the
// choice never changes a bit. The ranges give small M its parallelism (a one-row mHC call is 32
// blocks, each chain 512 fmas, not 16,384) and large M costs a workspace of S M N floats.
#include <algorithm>
#include <atomic>

#include "model/cuda/dense_gemm.h"
#include "model/cuda/dense_gemm_internal.cuh"

namespace deepinfer::model::cuda {
namespace {

constexpr int kThreads = 128;  // a block's threads: 16 along tokens x 8 along features
constexpr int kFeatureThreads = 8, kTokenThreads = kThreads / kFeatureThreads;
constexpr int kSlab = 16;                               // k values a stage holds per row
constexpr int kPitch = kSlab + 4;                       // floats between a stage's rows: 80 bytes, so rows r..r+7 hit distinct banks
constexpr int kRange = 512;                             // k values a range holds (a multiple of kSlab)
constexpr int64_t kMaxRows = (int64_t{1} << 31) - 257;  // M and N: tile origins and ends stay in int

struct F32Params {
  const float* x;
  const float* w;
  float* y;
  float* workspace;  // [S][M][N] when ranges > 1
  int64_t ldx, ldw, ldy;
  int m, n, k, ranges, feature_tiles;
};

// A block's tile: BM tokens x BN features, thread (tm, tn) owning tokens tm + 16 i (i < TM) and
// features tn + 8 j (j < TN). A stage is [BM + BN rows][kPitch] floats: x's rows, then W's; the
// ring holds as many stages as fit 64 KB (3..8), all but one in flight.
template <int TM, int TN>
struct RangeTile {
  static constexpr int kBM = TM * kTokenThreads, kBN = TN * kFeatureThreads;
  static constexpr int kStageFloats = (kBM + kBN) * kPitch;
  static constexpr int kStageBytes = kStageFloats * static_cast<int>(sizeof(float));
  static constexpr int kStages = 65536 / kStageBytes > 8 ? 8 : 65536 / kStageBytes < 3 ? 3 : 65536 / kStageBytes;
  static constexpr int kShared = kStages * kStageBytes;
};

// Values [k, k + 16) of the tile's rows into `stage`, 16 bytes a copy; rows past M or N and
// values past kend are zero-filled (never counted: the chains stop at kend, stores at M and N).
template <int TM, int TN>
__device__ __forceinline__ void issue_stage(float* stage, const F32Params& p, int m0, int n0, int k, int kend) {
  using Tile = RangeTile<TM, TN>;
  constexpr int kCopies = (Tile::kBM + Tile::kBN) * kSlab / 4;
#pragma unroll
  for (int i = 0; i < (kCopies + kThreads - 1) / kThreads; ++i) {
    const int c = static_cast<int>(threadIdx.x) + i * kThreads, row = c >> 2, q = (c & 3) * 4;
    if (c >= kCopies) break;
    const bool is_x = row < Tile::kBM;
    const int r = (is_x ? m0 : n0 - Tile::kBM) + row, rows = is_x ? p.m : p.n;
    const bool valid = r < rows && k + q < kend;
    const float* src =
        (is_x ? p.x + static_cast<int64_t>(min(r, rows - 1)) * p.ldx : p.w + static_cast<int64_t>(min(r, rows - 1)) * p.ldw) +
        (valid ? k + q : 0);
    copy16_async(stage + row * kPitch + q, src, valid);
  }
}

// Block (tile, range) = (blockIdx.x, blockIdx.y); tile = token tile * feature_tiles + feature tile.
template <int TM, int TN>
__global__ void __launch_bounds__(kThreads) f32_ranges_kernel(const F32Params p) {
  using Tile = RangeTile<TM, TN>;
  extern __shared__ __align__(16) float stages[];
  const int m0 = static_cast<int>(blockIdx.x) / p.feature_tiles * Tile::kBM,
            n0 = static_cast<int>(blockIdx.x) % p.feature_tiles * Tile::kBN;
  const int s = static_cast<int>(blockIdx.y), k0 = s * kRange, k1 = min(k0 + kRange, p.k), slabs = (k1 - k0 + kSlab - 1) / kSlab;
  const int tm = static_cast<int>(threadIdx.x) / kFeatureThreads, tn = static_cast<int>(threadIdx.x) % kFeatureThreads;
  constexpr int kStages = Tile::kStages;
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < slabs) issue_stage<TM, TN>(stages + i * Tile::kStageFloats, p, m0, n0, k0 + i * kSlab, k1);
    commit_copies();
  }
  float acc[TM][TN] = {};
  for (int i = 0; i < slabs; ++i) {
    wait_copies<kStages - 2>();  // slab i has landed (this thread's copies) ...
    __syncthreads();             // ... everyone's; and everyone is done with slab i - 1's buffer
    if (i + kStages - 1 < slabs)
      issue_stage<TM, TN>(stages + (i + kStages - 1) % kStages * Tile::kStageFloats, p, m0, n0, k0 + (i + kStages - 1) * kSlab, k1);
    commit_copies();
    const float* stage = stages + i % kStages * Tile::kStageFloats;
    const int count = min(kSlab, k1 - k0 - i * kSlab);  // K is a multiple of 4: 4, 8, 12 or 16
#pragma unroll
    for (int q = 0; q < kSlab; q += 4) {
      if (q < count) {
        float4 a[TM];
#pragma unroll
        for (int t = 0; t < TM; ++t) a[t] = *reinterpret_cast<const float4*>(stage + (tm + t * kTokenThreads) * kPitch + q);
#pragma unroll
        for (int j = 0; j < TN; ++j) {
          const float4 b = *reinterpret_cast<const float4*>(stage + (Tile::kBM + tn + j * kFeatureThreads) * kPitch + q);
#pragma unroll
          for (int t = 0; t < TM; ++t) {
            float v = acc[t][j];
            v = __fmaf_rn(a[t].x, b.x, v);
            v = __fmaf_rn(a[t].y, b.y, v);
            v = __fmaf_rn(a[t].z, b.z, v);
            acc[t][j] = __fmaf_rn(a[t].w, b.w, v);
          }
        }
      }
    }
  }
#pragma unroll
  for (int t = 0; t < TM; ++t) {
    const int row = m0 + tm + t * kTokenThreads;
    if (row >= p.m) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int col = n0 + tn + j * kFeatureThreads;
      if (col >= p.n) continue;
      if (p.ranges == 1) {
        p.y[static_cast<int64_t>(row) * p.ldy + col] = acc[t][j];
      } else {
        p.workspace[(static_cast<int64_t>(s) * p.m + row) * p.n + col] = acc[t][j];
      }
    }
  }
}

// y = ((p_0 + p_1) + ...) + p_{S-1}, one thread per element.
__global__ void __launch_bounds__(256) sum_ranges(const F32Params p) {
  const int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x, elements = int64_t{p.m} * p.n;
  if (e >= elements) return;
  float sum = p.workspace[e];
  for (int s = 1; s < p.ranges; ++s) sum = __fadd_rn(sum, p.workspace[s * elements + e]);
  p.y[e / p.n * p.ldy + e % p.n] = sum;
}

int ranges_of(int64_t k) { return static_cast<int>((k + kRange - 1) / kRange); }

// The largest tile whose blocks still fill the multiprocessors twice: TN from N (64, 24 or 8
// features a block) down to 1, and for each TM from 8 down to 1; else the smallest, 16 x 8 (small
// M: the most blocks, so the most bytes in flight).
struct F32Plan {
  int tm, tn;
};

int64_t blocks_of(int64_t m, int64_t n, int64_t k, F32Plan plan) {
  const int64_t bm = plan.tm * kTokenThreads, bn = plan.tn * kFeatureThreads;
  return (m + bm - 1) / bm * ((n + bn - 1) / bn) * ranges_of(k);
}

F32Plan choose_f32(int64_t m, int64_t n, int64_t k, int sms) {
  for (const int tn : {8, 3, 1}) {
    if ((tn == 8 && n <= 24) || (tn == 3 && n <= 8)) continue;  // no wider than N needs
    for (const int tm : {8, 4, 2, 1})
      if (blocks_of(m, n, k, {tm, tn}) >= 2 * int64_t{sms}) return {tm, tn};
  }
  return {1, 1};
}

template <int TM, int TN>
cudaError_t launch_ranges(F32Params p, int device, cudaStream_t stream) {
  using Tile = RangeTile<TM, TN>;
  static std::atomic<uint64_t> configured{0};  // bit d: the shared-memory limit raised on device d
  const uint64_t bit = device >= 0 && device < 64 ? uint64_t{1} << device : 0;
  if (bit == 0 || (configured.load(std::memory_order_relaxed) & bit) == 0) {
    const cudaError_t error = cudaFuncSetAttribute(f32_ranges_kernel<TM, TN>, cudaFuncAttributeMaxDynamicSharedMemorySize, Tile::kShared);
    if (error != cudaSuccess) return error;
    configured.fetch_or(bit, std::memory_order_relaxed);
  }
  const int64_t feature_tiles = (p.n + Tile::kBN - 1) / Tile::kBN, tiles = (p.m + Tile::kBM - 1) / Tile::kBM * feature_tiles;
  if (tiles >= (int64_t{1} << 31) || p.ranges > 65535) return cudaErrorInvalidValue;
  p.feature_tiles = static_cast<int>(feature_tiles);
  f32_ranges_kernel<TM, TN><<<dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(p.ranges)), kThreads, Tile::kShared, stream>>>(p);
  if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess || p.ranges == 1) return error;
  const int64_t elements = int64_t{p.m} * p.n;
  sum_ranges<<<static_cast<unsigned>((elements + 255) / 256), 256, 0, stream>>>(p);
  return cudaGetLastError();
}

template <int TN>
cudaError_t launch_tm(const F32Params& p, int tm, int device, cudaStream_t stream) {
  switch (tm) {
    case 8: return launch_ranges<8, TN>(p, device, stream);
    case 4: return launch_ranges<4, TN>(p, device, stream);
    case 2: return launch_ranges<2, TN>(p, device, stream);
    default: return launch_ranges<1, TN>(p, device, stream);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

bool valid_f32(const DenseGemmF32Args& a) {
  if (!dense_gemm_f32_shape_supported(a.n, a.k) || a.m < 0 || a.m > kMaxRows) return false;
  if (a.m == 0) return true;
  if (ranges_of(a.k) > 1 && (a.workspace == nullptr || a.m * a.n > (int64_t{1} << 40))) return false;
  return a.x != nullptr && a.w != nullptr && a.y != nullptr && aligned16(a.x) && aligned16(a.w) &&
         reinterpret_cast<uintptr_t>(a.y) % 4 == 0 && a.ldx >= a.k && a.ldw >= a.k && a.ldx % 4 == 0 && a.ldw % 4 == 0 && a.ldy >= a.n;
}

}  // namespace

bool dense_gemm_f32_shape_supported(int64_t n, int64_t k) {
  return n >= 1 && n <= kMaxRows && k >= 4 && k % 4 == 0 && k < (int64_t{1} << 30);
}

int dense_gemm_f32_ranges(int64_t k) { return ranges_of(k); }

int64_t dense_gemm_f32_workspace_bytes(int64_t m, int64_t n, int64_t k) {
  const int ranges = ranges_of(k);
  return ranges > 1 ? int64_t{ranges} * m * n * static_cast<int64_t>(sizeof(float)) : 0;
}

const char* dense_gemm_f32_plan(int64_t m, int64_t n, int64_t k, int sms) {
  static const char* const kNames[4][3] = {{"f32 ranges 16x8", "f32 ranges 16x24", "f32 ranges 16x64"},
                                           {"f32 ranges 32x8", "f32 ranges 32x24", "f32 ranges 32x64"},
                                           {"f32 ranges 64x8", "f32 ranges 64x24", "f32 ranges 64x64"},
                                           {"f32 ranges 128x8", "f32 ranges 128x24", "f32 ranges 128x64"}};
  const F32Plan plan = choose_f32(m, n, k, std::max(sms, 1));
  return kNames[plan.tm == 8 ? 3 : plan.tm == 4 ? 2 : plan.tm == 2 ? 1 : 0][plan.tn == 1 ? 0 : plan.tn == 3 ? 1 : 2];
}

cudaError_t dense_gemm_f32(const DenseGemmF32Args& a, cudaStream_t stream) {
  if (!valid_f32(a)) return cudaErrorInvalidValue;
  if (a.m == 0) return cudaSuccess;
  int sms = 0;
  int device = 0;
  if (const cudaError_t error = dense_gemm_device(device, sms); error != cudaSuccess) return error;
  const F32Params p{
      a.x, a.w, a.y, a.workspace, a.ldx, a.ldw, a.ldy, static_cast<int>(a.m), static_cast<int>(a.n), static_cast<int>(a.k), ranges_of(a.k),
      0};
  const F32Plan plan = choose_f32(a.m, a.n, a.k, sms);
  switch (plan.tn) {
    case 1: return launch_tm<1>(p, plan.tm, device, stream);
    case 3: return launch_tm<3>(p, plan.tm, device, stream);
    default: return launch_tm<8>(p, plan.tm, device, stream);
  }
}

}  // namespace deepinfer::model::cuda
