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

// Divides every row (kRows) or column of p by its sum + eps (as sinkhorn.cu).
template <int N, bool kRows>
__device__ void normalize(float (&p)[N][N], float eps) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < N; ++j) s += kRows ? p[i][j] : p[j][i];
#pragma unroll
    for (int j = 0; j < N; ++j) (kRows ? p[i][j] : p[j][i]) /= s + eps;
  }
}

template <int N>
__global__ void __launch_bounds__(kThreads) hc_pre_kernel(const HcPreArgs a) {
  extern __shared__ float x_s[];  // [D]: the collapse, rounded to bfloat16
  __shared__ float scratch[kThreads / 32];
  __shared__ float pre_s[N];
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

  if (threadIdx.x == 0) {
    constexpr int kMix = (2 + N) * N;
    const float* raw = a.raw + t * kMix;
    float mix[kMix];
#pragma unroll
    for (int i = 0; i < kMix; ++i) mix[i] = __fmul_rn(raw[i], inv_rms);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      pre_s[j] = __fadd_rn(sigmoid(__fadd_rn(__fmul_rn(mix[j], a.scale[0]), a.base[j])), a.hc_eps);
      a.post[t * N + j] = 2.0f * sigmoid(__fadd_rn(__fmul_rn(mix[N + j], a.scale[1]), a.base[N + j]));
    }
    // Sinkhorn: softmax over each row + eps, then columns; (iters - 1) x (rows, columns).
    float p[N][N];
#pragma unroll
    for (int r = 0; r < N; ++r) {
      float logit[N], m = -INFINITY;
#pragma unroll
      for (int c = 0; c < N; ++c)
        m = fmaxf(m, logit[c] = __fadd_rn(__fmul_rn(mix[2 * N + r * N + c], a.scale[2]), a.base[2 * N + r * N + c]));
      float s = 0.0f;
#pragma unroll
      for (int c = 0; c < N; ++c) s += (p[r][c] = expf(logit[c] - m));
#pragma unroll
      for (int c = 0; c < N; ++c) p[r][c] = p[r][c] / s + a.hc_eps;
    }
    for (int it = 0; it < a.iters; ++it) {
      if (it > 0) normalize<N, /*kRows=*/true>(p, a.hc_eps);
      normalize<N, /*kRows=*/false>(p, a.hc_eps);
    }
#pragma unroll
    for (int r = 0; r < N; ++r)
#pragma unroll
      for (int c = 0; c < N; ++c) a.comb[(t * N + r) * N + c] = p[r][c];
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
