#include "model/cuda/act_quant.h"

#include <cuda_fp8.h>

namespace deepinfer::model::cuda {
namespace {

constexpr int kThreads = 256;  // 8 warps, one (row, block) per warp at a time
constexpr int kWarps = kThreads / 32;
constexpr float kAmaxFloor = 1e-4f;          // quant.h kFp8ActAmaxFloor
constexpr float kInvFp8Max = 1.0f / 448.0f;  // float32(1/448), the official fp8_max_inv

// ceil(log2(v)) of a positive normal float32 from its bits: the exponent, plus one unless the
// mantissa is zero (the official fast_log2_ceil).
__device__ int ceil_log2(float v) {
  const int bits = __float_as_int(v);
  return ((bits >> 23) & 0xFF) - 127 + ((bits & 0x7FFFFF) != 0 ? 1 : 0);
}

// 2^e for e in [-126, 127], exactly.
__device__ float pow2(int e) { return __int_as_float((e + 127) << 23); }

__device__ uint32_t e4m3x4(float a, float b, float c, float d) {
  const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
  const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(c, d), __NV_SATFINITE, __NV_E4M3);
  return lo | (hi << 16);  // column order in memory (little endian: the first value in the low byte)
}

// Warp w handles (row w / blocks, block w % blocks); lane l its columns 4 l .. 4 l + 3.
__global__ void act_quant_kernel(ActQuantArgs a, int64_t blocks) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int64_t total = a.padded_rows * blocks;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kWarps;
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32; w < total; w += stride) {
    const int64_t row = w / blocks, block = w % blocks;
    const int64_t col = block * kActQuantBlock + 4 * lane;
    const bool inside = col < a.cols;  // cols % 4 == 0: all four columns or none
    const bool real = row < a.rows;
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (inside && real) {
      const uint2 raw = *reinterpret_cast<const uint2*>(a.x + row * a.cols + col);
      const __nv_bfloat162 p = *reinterpret_cast<const __nv_bfloat162*>(&raw.x);
      const __nv_bfloat162 q = *reinterpret_cast<const __nv_bfloat162*>(&raw.y);
      v[0] = __low2float(p);
      v[1] = __high2float(p);
      v[2] = __low2float(q);
      v[3] = __high2float(q);
    }
    float amax = fmaxf(fmaxf(fabsf(v[0]), fabsf(v[1])), fmaxf(fabsf(v[2]), fabsf(v[3])));
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
    // amax >= 1e-4: e >= -22; amax <= the bfloat16 maximum: e <= 120. Padding rows: scale 1.
    const int e = real ? ceil_log2(fmaxf(amax, kAmaxFloor) * kInvFp8Max) : 0;
    const float inverse = pow2(-e);  // x * 2^-e is exact: no product leaves the normal range
    if (inside) {
      *reinterpret_cast<uint32_t*>(a.codes + row * a.cols + col) = e4m3x4(v[0] * inverse, v[1] * inverse, v[2] * inverse, v[3] * inverse);
    }
    if (lane == 0) a.scales[row * a.scale_row_stride + block * a.scale_block_stride] = pow2(e);
  }
}

}  // namespace

bool act_quant_shape_supported(int64_t cols) { return cols > 0 && cols % 4 == 0; }

cudaError_t act_quant(const ActQuantArgs& a, cudaStream_t stream) {
  if (!act_quant_shape_supported(a.cols) || a.rows < 0 || a.padded_rows < a.rows) return cudaErrorInvalidValue;
  if (a.padded_rows == 0) return cudaSuccess;
  if ((a.rows > 0 && a.x == nullptr) || a.codes == nullptr || a.scales == nullptr) return cudaErrorInvalidValue;
  if (reinterpret_cast<uintptr_t>(a.x) % 8 != 0 || reinterpret_cast<uintptr_t>(a.codes) % 4 != 0) return cudaErrorInvalidValue;
  const int64_t blocks = (a.cols + kActQuantBlock - 1) / kActQuantBlock;
  const int64_t warps = a.padded_rows * blocks;
  const int64_t grid = (warps + kWarps - 1) / kWarps;
  act_quant_kernel<<<static_cast<unsigned>(grid < 8192 ? grid : 8192), kThreads, 0, stream>>>(a, blocks);
  return cudaGetLastError();
}

}  // namespace deepinfer::model::cuda
