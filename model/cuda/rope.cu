#include "model/cuda/rope.h"

namespace deepinfer::model::cuda {
namespace {

constexpr int kWarps = 8;  // vectors per block

// kVec consecutive bfloat16 values (8: one 16-byte access, 2: one 4-byte access) as float32.
template <int kVec>
__device__ void load(const __nv_bfloat16* p, float (&f)[kVec]) {
  if constexpr (kVec == 8) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 v = __bfloat1622float2(pairs[i]);
      f[2 * i] = v.x;
      f[2 * i + 1] = v.y;
    }
  } else {
    const float2 v = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
    f[0] = v.x;
    f[1] = v.y;
  }
}

// Rounds kVec float32 values to bfloat16 (to nearest even) and stores them.
template <int kVec>
__device__ void store(__nv_bfloat16* p, const float (&f)[kVec]) {
  if constexpr (kVec == 8) {
    uint4 raw;
    __nv_bfloat162* pairs = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) pairs[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
    *reinterpret_cast<uint4*>(p) = raw;
  } else {
    *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(f[0], f[1]);
  }
}

// Warp w of block b: vector b kWarps + w (row vector / heads). Lane l owns the chunks of kVec
// channels l, l + 32, ...; rope_dim is a multiple of kVec, so a chunk is rotated whole or not
// at all, and a pair (2i, 2i + 1) never straddles two chunks.
template <int kVec>
__global__ void __launch_bounds__(kWarps * 32) norm_rope_kernel(const NormRopeArgs a) {
  const int64_t vector = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (vector >= a.rows * a.heads) return;  // the whole warp
  const int lane = threadIdx.x % 32;
  const int64_t row = vector / a.heads;
  const __nv_bfloat16* x = a.x + vector * a.dim;
  __nv_bfloat16* out = a.out + vector * a.dim;
  const int chunks = a.dim / kVec, rope_first = a.dim - a.rope_dim;

  float inv = 1.0f;
  if (a.norm) {
    float squares = 0.0f;
    for (int c = lane; c < chunks; c += 32) {
      float f[kVec];
      load<kVec>(x + c * kVec, f);
#pragma unroll
      for (int i = 0; i < kVec; ++i) squares = __fmaf_rn(f[i], f[i], squares);
    }
    // Every lane ends with the same bits (each step adds the same two values).
    for (int offset = 16; offset > 0; offset /= 2) squares = __fadd_rn(squares, __shfl_xor_sync(0xffffffffu, squares, offset));
    inv = rsqrtf(__fadd_rn(__fdiv_rn(squares, static_cast<float>(a.dim)), a.eps));
  }

  // Without the norm, in place: the channels before the rotated ones stay as they are.
  const int first = a.norm || a.out != a.x ? 0 : rope_first / kVec;
  const float* cos = a.cos + row * a.rope_dim;  // this row's [rope_dim / 2, 2]
  const float* sin = a.sin + row * a.rope_dim;
  for (int c = first + lane; c < chunks; c += 32) {
    float f[kVec];
    load<kVec>(x + c * kVec, f);
    if (a.norm) {
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        const int ch = c * kVec + i;
        float y = __fmul_rn(f[i], inv);
        if (a.norm_weight != nullptr) {
          y = __fmul_rn(y, a.norm_weight[ch]);
        } else if (a.norm_weight_bf16 != nullptr) {
          y = __fmul_rn(y, __bfloat162float(a.norm_weight_bf16[ch]));
        }
        f[i] = __bfloat162float(__float2bfloat16_rn(y));  // rms_norm's result, what apply() reads
      }
    }
    if (c * kVec >= rope_first) {
#pragma unroll
      for (int i = 0; i < kVec; i += 2) {
        const int pair = (c * kVec + i - rope_first) / 2;
        const float2 cs = *reinterpret_cast<const float2*>(cos + 2 * pair), sn = *reinterpret_cast<const float2*>(sin + 2 * pair);
        const float even = f[i], odd = f[i + 1];
        // pairs * C + swapped pairs * S, as RopeAngles::apply
        f[i] = __fadd_rn(__fmul_rn(even, cs.x), __fmul_rn(odd, sn.x));
        f[i + 1] = __fadd_rn(__fmul_rn(odd, cs.y), __fmul_rn(even, sn.y));
      }
    }
    store<kVec>(out + c * kVec, f);
  }
}

bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace

cudaError_t norm_rope(const NormRopeArgs& a, cudaStream_t stream) {
  if (a.x == nullptr || a.out == nullptr || a.dim < 2 || a.dim % 2 != 0 || a.rope_dim < 0 || a.rope_dim % 2 != 0 || a.rope_dim > a.dim ||
      (a.rope_dim > 0 && (a.cos == nullptr || a.sin == nullptr || !aligned(a.cos, 8) || !aligned(a.sin, 8))) || a.heads < 1 || a.rows < 0) {
    return cudaErrorInvalidValue;
  }
  const int64_t vectors = a.rows * a.heads, blocks = (vectors + kWarps - 1) / kWarps;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  if (vectors == 0) return cudaSuccess;
  // Chosen by the sizes only, so a vector's sum of squares has one order whatever the pointers.
  const bool wide = a.dim % 8 == 0 && a.rope_dim % 8 == 0;
  const uintptr_t access = wide ? 16 : 4;
  if (!aligned(a.x, access) || !aligned(a.out, access)) return cudaErrorInvalidValue;
  if (wide) {
    norm_rope_kernel<8><<<static_cast<unsigned>(blocks), kWarps * 32, 0, stream>>>(a);
  } else {
    norm_rope_kernel<2><<<static_cast<unsigned>(blocks), kWarps * 32, 0, stream>>>(a);
  }
  return cudaGetLastError();
}

}  // namespace deepinfer::model::cuda
