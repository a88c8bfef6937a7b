#include "model/cuda/hyper_connection.h"

namespace deepinfer::model::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxDim = 16384;

// The block's sum of `v` in a fixed order (lanes by shuffles, then warps in order).
__device__ float block_sum(float v, float* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  __syncthreads();  // scratch free
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < kThreads / 32; ++w) total += scratch[w];
  return total;
}

__device__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// The threads that run a token's Sinkhorn, one per element of the N x N comb: warp 0 when the
// comb fits in a warp (synchronized by __syncwarp), else the whole block (__syncthreads).
template <int N>
__device__ bool runs_sinkhorn() {
  return N * N > 32 || threadIdx.x < 32;
}
template <int N>
__device__ void sinkhorn_sync() {
  if constexpr (N * N <= 32) {
    __syncwarp();
  } else {
    __syncthreads();
  }
}

// Divides every row (kRows) or column of p by its sum + eps (as sinkhorn.cu): thread e < N N owns
// element (e / N, e % N) and sums its row or column itself, in index order, as a serial loop would.
template <int N, bool kRows>
__device__ void normalize(float (&p)[N][N], int e, float eps) {
  const int r = e / N, c = e % N;
  float v = 0.0f;
  if (e < N * N) {
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < N; ++j) s += kRows ? p[r][j] : p[j][c];
    v = p[r][c] / (s + eps);
  }
  sinkhorn_sync<N>();  // every sum read before any element changes
  if (e < N * N) p[r][c] = v;
  sinkhorn_sync<N>();
}

template <int N>
__global__ void __launch_bounds__(kThreads) hc_pre_kernel(const HcPreArgs a) {
  extern __shared__ float x_s[];  // [D]: the collapse, rounded to bfloat16
  __shared__ float scratch[kThreads / 32];
  __shared__ float pre_s[N];
  __shared__ float p_s[N][N];  // the comb during Sinkhorn
  const int64_t t = blockIdx.x;
  const int D = a.dim;
  const __nv_bfloat162* streams = reinterpret_cast<const __nv_bfloat162*>(a.streams + t * N * D);

  // inv_rms over the token's n D values.
  float squares = 0.0f;
  for (int i = threadIdx.x; i < N * D / 2; i += kThreads) {
    const float2 v = __bfloat1622float2(streams[i]);
    squares += v.x * v.x + v.y * v.y;
  }
  const float inv_rms = rsqrtf(block_sum(squares, scratch) / static_cast<float>(N * D) + a.rms_eps);

  const float* raw = a.raw + t * (2 + N) * N;  // the mix before 1 / rms: pre [N], post [N], comb [N, N]
  const auto mix = [&](int i) { return __fmul_rn(raw[i], inv_rms); };
  const int e = threadIdx.x;
  if (e < N) {
    pre_s[e] = __fadd_rn(sigmoid(__fadd_rn(__fmul_rn(mix(e), a.scale[0]), a.base[e])), a.hc_eps);
    a.post[t * N + e] = 2.0f * sigmoid(__fadd_rn(__fmul_rn(mix(N + e), a.scale[1]), a.base[N + e]));
  }
  // Sinkhorn, thread e on element (r, c): softmax over each row + eps (each thread of a row
  // computes the row's N exponentials itself, in order), then columns; (iters - 1) x (rows,
  // columns). The bits of the serial loop: every sum in index order, every rounding the same.
  if (runs_sinkhorn<N>()) {
    if (e < N * N) {
      const int r = e / N, c = e % N;
      float logit[N], m = -INFINITY;
#pragma unroll
      for (int j = 0; j < N; ++j)
        m = fmaxf(m, logit[j] = __fadd_rn(__fmul_rn(mix(2 * N + r * N + j), a.scale[2]), a.base[2 * N + r * N + j]));
      float s = 0.0f;
#pragma unroll
      for (int j = 0; j < N; ++j) s += expf(logit[j] - m);
      p_s[r][c] = expf(logit[c] - m) / s + a.hc_eps;
    }
    sinkhorn_sync<N>();
    for (int it = 0; it < a.iters; ++it) {
      if (it > 0) normalize<N, /*kRows=*/true>(p_s, e, a.hc_eps);
      normalize<N, /*kRows=*/false>(p_s, e, a.hc_eps);
    }
    if (e < N * N) a.comb[t * N * N + e] = p_s[e / N][e % N];
  }
  __syncthreads();

  // The collapse (products rounded, summed over the streams in order), rounded to bfloat16.
  float pre[N];
#pragma unroll
  for (int j = 0; j < N; ++j) pre[j] = pre_s[j];
  float squares2 = 0.0f;
  for (int i = threadIdx.x; i < D / 2; i += kThreads) {
    float2 sum = make_float2(0.0f, 0.0f);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const float2 v = __bfloat1622float2(streams[j * D / 2 + i]);
      sum.x = __fadd_rn(sum.x, __fmul_rn(pre[j], v.x));
      sum.y = __fadd_rn(sum.y, __fmul_rn(pre[j], v.y));
    }
    const float2 rounded = __bfloat1622float2(__float22bfloat162_rn(sum));
    x_s[2 * i] = rounded.x;
    x_s[2 * i + 1] = rounded.y;
    squares2 += rounded.x * rounded.x + rounded.y * rounded.y;
  }
  const float inv = rsqrtf(block_sum(squares2, scratch) / static_cast<float>(D) + a.rms_eps);
  __nv_bfloat16* out = a.out + t * D;
  for (int d = threadIdx.x; d < D; d += kThreads) {
    const float w = a.norm_weight != nullptr ? a.norm_weight[d] : __bfloat162float(a.norm_weight_bf16[d]);
    out[d] = __float2bfloat16_rn(__fmul_rn(__fmul_rn(x_s[d], inv), w));
  }
}

// Thread: channels 2i, 2i + 1 of token blockIdx.x, all n new streams.
template <int N>
__global__ void __launch_bounds__(kThreads) hc_post_kernel(const HcPostArgs a) {
  const int64_t t = blockIdx.x;
  const int i = blockIdx.y * kThreads + threadIdx.x, half = a.dim / 2;
  if (i >= half) return;
  const __nv_bfloat162* streams = reinterpret_cast<const __nv_bfloat162*>(a.streams + t * N * a.dim);
  const float2 y = __bfloat1622float2(reinterpret_cast<const __nv_bfloat162*>(a.y + t * a.dim)[i]);
  float2 s[N];
#pragma unroll
  for (int j = 0; j < N; ++j) s[j] = __bfloat1622float2(streams[j * half + i]);
  __nv_bfloat162* out = reinterpret_cast<__nv_bfloat162*>(a.out + t * N * a.dim);
#pragma unroll
  for (int k = 0; k < N; ++k) {
    float2 mixed = make_float2(0.0f, 0.0f);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const float c = a.comb[(t * N + j) * N + k];
      mixed.x = __fmaf_rn(c, s[j].x, mixed.x);
      mixed.y = __fmaf_rn(c, s[j].y, mixed.y);
    }
    const float post = a.post[t * N + k];
    out[k * half + i] =
        __float22bfloat162_rn(make_float2(__fadd_rn(__fmul_rn(post, y.x), mixed.x), __fadd_rn(__fmul_rn(post, y.y), mixed.y)));
  }
}

template <int N>
cudaError_t launch_pre(const HcPreArgs& a, cudaStream_t stream) {
  const size_t shared = static_cast<size_t>(a.dim) * sizeof(float);
  if (shared > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(hc_pre_kernel<N>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared));
    if (e != cudaSuccess) return e;
  }
  hc_pre_kernel<N><<<static_cast<unsigned>(a.tokens), kThreads, shared, stream>>>(a);
  return cudaGetLastError();
}

template <int N>
cudaError_t launch_post(const HcPostArgs& a, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(a.tokens), static_cast<unsigned>((a.dim / 2 + kThreads - 1) / kThreads));
  hc_post_kernel<N><<<grid, kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace

cudaError_t hc_pre(const HcPreArgs& a, cudaStream_t stream) {
  if (a.streams == nullptr || a.raw == nullptr || a.scale == nullptr || a.base == nullptr ||
      (a.norm_weight == nullptr && a.norm_weight_bf16 == nullptr) || a.out == nullptr || a.post == nullptr || a.comb == nullptr ||
      a.dim < 2 || a.dim % 2 != 0 || a.dim > kMaxDim || a.iters < 1 || a.tokens < 0 || a.tokens > 0x7fffffff) {
    return cudaErrorInvalidValue;
  }
  if (a.tokens == 0) return cudaSuccess;
  switch (a.n) {
    case 1: return launch_pre<1>(a, stream);
    case 2: return launch_pre<2>(a, stream);
    case 4: return launch_pre<4>(a, stream);
    case 8: return launch_pre<8>(a, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t hc_post(const HcPostArgs& a, cudaStream_t stream) {
  if (a.streams == nullptr || a.y == nullptr || a.post == nullptr || a.comb == nullptr || a.out == nullptr || a.dim < 2 || a.dim % 2 != 0 ||
      a.tokens < 0 || a.tokens > 0x7fffffff || a.dim / 2 > 65535 * kThreads) {
    return cudaErrorInvalidValue;
  }
  if (a.tokens == 0) return cudaSuccess;
  switch (a.n) {
    case 1: return launch_post<1>(a, stream);
    case 2: return launch_post<2>(a, stream);
    case 4: return launch_post<4>(a, stream);
    case 8: return launch_post<8>(a, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace deepinfer::model::cuda
