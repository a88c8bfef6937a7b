#include "model/cuda/sinkhorn.h"

namespace deepinfer::model::cuda {
namespace {

// Divides every row (kRows) or column of p by its sum + eps.
template <int N, bool kRows>
__device__ void normalize(float (&p)[N][N], float eps) {
#pragma unroll
  for (int a = 0; a < N; ++a) {
    float s = 0.0f;
#pragma unroll
    for (int b = 0; b < N; ++b) s += kRows ? p[a][b] : p[b][a];
#pragma unroll
    for (int b = 0; b < N; ++b) (kRows ? p[a][b] : p[b][a]) /= s + eps;
  }
}

template <int N>
__global__ void sinkhorn_kernel(const float* logits, float* out, int64_t tokens, int iters, float eps) {
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (t >= tokens) return;
  float p[N][N];
  const float* in = logits + t * N * N;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    float m = in[i * N];
#pragma unroll
    for (int j = 1; j < N; ++j) m = fmaxf(m, in[i * N + j]);
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < N; ++j) s += (p[i][j] = expf(in[i * N + j] - m));
#pragma unroll
    for (int j = 0; j < N; ++j) p[i][j] = p[i][j] / s + eps;
  }
  for (int it = 0; it < iters; ++it) {
    if (it > 0) normalize<N, /*kRows=*/true>(p, eps);
    normalize<N, /*kRows=*/false>(p, eps);
  }
  float* dst = out + t * N * N;
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < N; ++j) dst[i * N + j] = p[i][j];
}

template <int N>
void launch(const float* logits, float* out, int64_t tokens, int iters, float eps, cudaStream_t stream) {
  constexpr int kThreads = 128;
  const auto blocks = static_cast<unsigned>((tokens + kThreads - 1) / kThreads);
  sinkhorn_kernel<N><<<blocks, kThreads, 0, stream>>>(logits, out, tokens, iters, eps);
}

}  // namespace

cudaError_t sinkhorn(const float* logits, float* out, int64_t tokens, int n, int iters, float eps, cudaStream_t stream) {
  if (iters < 1) return cudaErrorInvalidValue;
  if (tokens <= 0) return cudaSuccess;
  switch (n) {
    case 1: launch<1>(logits, out, tokens, iters, eps, stream); break;
    case 2: launch<2>(logits, out, tokens, iters, eps, stream); break;
    case 4: launch<4>(logits, out, tokens, iters, eps, stream); break;
    case 8: launch<8>(logits, out, tokens, iters, eps, stream); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace deepinfer::model::cuda
