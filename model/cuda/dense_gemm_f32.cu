// The float32 batch-invariant GEMM of dense_gemm.h (the router and the mHC projection), on CUDA
// cores. Per element: K in chunks of L = 16 ceil(K / 4096) values (at most 256), each chunk's
// partial a sequential fma chain from 0 in k order, the partials added to 0 in chunk order
// (__fmaf_rn / __fadd_rn: nothing contracted or reassociated). Two kernels run that arithmetic:
//  - rows: one block of 256 threads per tile of TM tokens x TN features; thread c computes chunk
//    c's partials of the tile, then one thread per element adds the 256 partials in order (small
//    M: the k chain is split over the block, so no element waits for K dependent fmas);
//  - tiles: a classic shared-memory SGEMM (64 x 64 or 32 x 32 elements a block, 4 x 4 a thread)
//    walking the chunks in order, the chunk partial added to the element's sum at each chunk end
//    (large M: operands reused from shared memory).
#include <algorithm>
#include <atomic>

#include "model/cuda/dense_gemm.h"
#include "model/cuda/dense_gemm_internal.cuh"

namespace deepinfer::model::cuda {
namespace {

constexpr int kRowThreads = 256;                        // the most chunks, and the rows kernel's threads
constexpr int64_t kMaxRows = (int64_t{1} << 31) - 257;  // M and N: tile origins and ends stay in int
constexpr int kSlab = 16;                               // k values per shared-memory slab of the tiles kernel (a chunk is whole slabs)

struct F32Params {
  const float* x;
  const float* w;
  float* y;
  int64_t ldx, ldw, ldy;
  int m, n, k, chunk;  // chunk: L, a multiple of 16
};

__device__ __forceinline__ float4 load4(const float* p) { return __ldg(reinterpret_cast<const float4*>(p)); }

__device__ __forceinline__ float dot4(float4 a, float4 b, float p) {
  p = __fmaf_rn(a.x, b.x, p);
  p = __fmaf_rn(a.y, b.y, p);
  p = __fmaf_rn(a.z, b.z, p);
  return __fmaf_rn(a.w, b.w, p);
}

// Block (token tile, feature tile) = (blockIdx.x / feature tiles, blockIdx.x % feature tiles).
template <int TM, int TN>
__global__ void __launch_bounds__(kRowThreads) f32_rows_kernel(const F32Params p, int feature_tiles) {
  __shared__ float partial[kRowThreads][TM * TN];
  const int c = threadIdx.x, m0 = blockIdx.x / feature_tiles * TM, n0 = blockIdx.x % feature_tiles * TN;
  const float* xr[TM];
  const float* wr[TN];
#pragma unroll
  for (int i = 0; i < TM; ++i) xr[i] = p.x + static_cast<int64_t>(min(m0 + i, p.m - 1)) * p.ldx;
#pragma unroll
  for (int j = 0; j < TN; ++j) wr[j] = p.w + static_cast<int64_t>(min(n0 + j, p.n - 1)) * p.ldw;
  float acc[TM][TN] = {};
  const int k0 = c * p.chunk, k1 = min(k0 + p.chunk, p.k);  // empty past the last chunk
#pragma unroll 4
  for (int k = k0; k < k1; k += 4) {
    float4 a[TM], b[TN];
#pragma unroll
    for (int i = 0; i < TM; ++i) a[i] = load4(xr[i] + k);
#pragma unroll
    for (int j = 0; j < TN; ++j) b[j] = load4(wr[j] + k);
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) acc[i][j] = dot4(a[i], b[j], acc[i][j]);
  }
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) partial[c][i * TN + j] = acc[i][j];
  __syncthreads();
  if (c >= TM * TN) return;
  const int i = c / TN, j = c % TN, chunks = (p.k + p.chunk - 1) / p.chunk;
  if (m0 + i >= p.m || n0 + j >= p.n) return;
  float sum = 0.0f;
  for (int s = 0; s < chunks; ++s) sum = __fadd_rn(sum, partial[s][c]);
  p.y[static_cast<int64_t>(m0 + i) * p.ldy + n0 + j] = sum;
}

// Rows [r0, r0 + R) x values [k, k + 16) of src (ld) into dst[16][R + 4], transposed; past `rows`
// or K: zeros (never used for a stored element or a counted k).
template <int R, int kThreads>
__device__ __forceinline__ void load_slab(float (*dst)[R + 4], const float* src, int64_t ld, int r0, int rows, int k, int kmax) {
  for (int e = threadIdx.x; e < R * 4; e += kThreads) {
    const int r = e >> 2, q = (e & 3) * 4;
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (r0 + r < rows && k + q < kmax) v = load4(src + static_cast<int64_t>(r0 + r) * ld + k + q);
    dst[q][r] = v.x;
    dst[q + 1][r] = v.y;
    dst[q + 2][r] = v.z;
    dst[q + 3][r] = v.w;
  }
}

// One block per BM x BN tile, (BM / 4) x (BN / 4) threads of 4 x 4 elements.
template <int BM, int BN>
__global__ void __launch_bounds__(BM* BN / 16) f32_tiles_kernel(const F32Params p, int feature_tiles) {
  constexpr int kThreads = BM * BN / 16;
  __shared__ __align__(16) float xs[kSlab][BM + 4];
  __shared__ __align__(16) float ws[kSlab][BN + 4];
  const int m0 = blockIdx.x / feature_tiles * BM, n0 = blockIdx.x % feature_tiles * BN;
  const int ty = threadIdx.x / (BN / 4), tx = threadIdx.x % (BN / 4);
  float sum[4][4] = {}, part[4][4] = {};
  for (int k = 0; k < p.k; k += kSlab) {
    __syncthreads();  // every thread is done with the previous slab
    load_slab<BM, kThreads>(xs, p.x, p.ldx, m0, p.m, k, p.k);
    load_slab<BN, kThreads>(ws, p.w, p.ldw, n0, p.n, k, p.k);
    __syncthreads();
    const int count = min(kSlab, p.k - k);
#pragma unroll
    for (int kk = 0; kk < kSlab; ++kk) {
      if (kk < count) {
        const float4 a = *reinterpret_cast<const float4*>(&xs[kk][ty * 4]);
        const float4 b = *reinterpret_cast<const float4*>(&ws[kk][tx * 4]);
        const float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) part[i][j] = __fmaf_rn(av[i], bv[j], part[i][j]);
      }
    }
    if ((k + kSlab) % p.chunk == 0 || k + kSlab >= p.k) {  // a chunk ends: its partial joins the sum
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) sum[i][j] = __fadd_rn(sum[i][j], part[i][j]), part[i][j] = 0.0f;
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int row = m0 + ty * 4 + i;
    if (row >= p.m) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (n0 + tx * 4 + j < p.n) p.y[static_cast<int64_t>(row) * p.ldy + n0 + tx * 4 + j] = sum[i][j];
  }
}

enum class F32Plan { kRows1x1, kRows1x4, kRows4x4, kTiles32, kTiles64 };

int64_t tiles_of(int64_t m, int64_t n, int tm, int tn) { return (m + tm - 1) / tm * ((n + tn - 1) / tn); }

// Shared-memory tiles from 1,024 rows on (64 x 64 where that gives two blocks a multiprocessor),
// where a block's K-long chains are worth its operand reuse; below, per-chunk threads over the
// largest element tile that still gives two blocks a multiprocessor (1 x 1 when none does).
F32Plan choose_f32(int64_t m, int64_t n, int sms) {
  const int64_t enough = 2 * int64_t{sms};
  if (m >= 1024) return tiles_of(m, n, 64, 64) >= enough ? F32Plan::kTiles64 : F32Plan::kTiles32;
  if (tiles_of(m, n, 4, 4) >= enough) return F32Plan::kRows4x4;
  if (tiles_of(m, n, 1, 4) >= enough) return F32Plan::kRows1x4;
  return F32Plan::kRows1x1;
}

const char* f32_plan_name(F32Plan plan) {
  switch (plan) {
    case F32Plan::kRows1x1: return "f32 chunk-parallel 1x1";
    case F32Plan::kRows1x4: return "f32 chunk-parallel 1x4";
    case F32Plan::kRows4x4: return "f32 chunk-parallel 4x4";
    case F32Plan::kTiles32: return "f32 tiles 32x32";
    case F32Plan::kTiles64: return "f32 tiles 64x64";
  }
  return "f32 chunk-parallel 1x1";
}

template <int TM, int TN>
cudaError_t launch_rows(const F32Params& p, cudaStream_t stream) {
  const int64_t feature_tiles = (p.n + TN - 1) / TN, blocks = (p.m + TM - 1) / TM * feature_tiles;
  if (blocks >= (int64_t{1} << 31)) return cudaErrorInvalidValue;
  f32_rows_kernel<TM, TN><<<static_cast<unsigned>(blocks), kRowThreads, 0, stream>>>(p, static_cast<int>(feature_tiles));
  return cudaGetLastError();
}

template <int B>
cudaError_t launch_tiles(const F32Params& p, cudaStream_t stream) {
  const int64_t feature_tiles = (p.n + B - 1) / B, blocks = (p.m + B - 1) / B * feature_tiles;
  if (blocks >= (int64_t{1} << 31)) return cudaErrorInvalidValue;
  f32_tiles_kernel<B, B><<<static_cast<unsigned>(blocks), B * B / 16, 0, stream>>>(p, static_cast<int>(feature_tiles));
  return cudaGetLastError();
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

bool valid_f32(const DenseGemmF32Args& a) {
  if (!dense_gemm_f32_shape_supported(a.n, a.k) || a.m < 0 || a.m > kMaxRows) return false;
  if (a.m == 0) return true;
  return a.x != nullptr && a.w != nullptr && a.y != nullptr && aligned16(a.x) && aligned16(a.w) &&
         reinterpret_cast<uintptr_t>(a.y) % 4 == 0 && a.ldx >= a.k && a.ldw >= a.k && a.ldx % 4 == 0 && a.ldw % 4 == 0 && a.ldy >= a.n;
}

}  // namespace

bool dense_gemm_f32_shape_supported(int64_t n, int64_t k) {
  return n >= 1 && n <= kMaxRows && k >= 4 && k % 4 == 0 && k < (int64_t{1} << 30);
}

const char* dense_gemm_f32_plan(int64_t m, int64_t n, int64_t, int sms) { return f32_plan_name(choose_f32(m, n, std::max(sms, 1))); }

cudaError_t dense_gemm_f32(const DenseGemmF32Args& a, cudaStream_t stream) {
  if (!valid_f32(a)) return cudaErrorInvalidValue;
  if (a.m == 0) return cudaSuccess;
  int sms = 0;
  int device = 0;
  if (const cudaError_t error = dense_gemm_device(device, sms); error != cudaSuccess) return error;
  const int64_t chunk = kSlab * ((a.k + 4095) / 4096);  // at most 256 chunks
  const F32Params p{
      a.x, a.w, a.y, a.ldx, a.ldw, a.ldy, static_cast<int>(a.m), static_cast<int>(a.n), static_cast<int>(a.k), static_cast<int>(chunk)};
  switch (choose_f32(a.m, a.n, sms)) {
    case F32Plan::kRows1x1: return launch_rows<1, 1>(p, stream);
    case F32Plan::kRows1x4: return launch_rows<1, 4>(p, stream);
    case F32Plan::kRows4x4: return launch_rows<4, 4>(p, stream);
    case F32Plan::kTiles32: return launch_tiles<32>(p, stream);
    case F32Plan::kTiles64: return launch_tiles<64>(p, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace deepinfer::model::cuda
