#include "model/cuda/fp4_dequant.h"

#include <cuda_bf16.h>

namespace deepinfer::model::cuda {
namespace {

constexpr int kBlock = 32;  // values per e8m0 scale = one 16-byte packed load
constexpr int kThreads = 256;

__constant__ float kE2m1[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// e8m0: 2^(s - 127); 255 is NaN; 0 is 2^-127 (an fp32 subnormal).
__device__ float e8m0(uint8_t s) {
  if (s == 255) return __int_as_float(0x7fc00000);
  if (s == 0) return __int_as_float(0x00400000);
  return __int_as_float(static_cast<int>(s) << 23);
}

__device__ uint16_t to_bf16_bits(float v) {
  const __nv_bfloat16 b = __float2bfloat16_rn(v);
  return *reinterpret_cast<const uint16_t*>(&b);
}

// Thread i of a matrix handles scale block i: 16 packed bytes -> 32 bfloat16 values.
__device__ void dequant_block(const uint8_t* packed, const uint8_t* scale, int64_t block, uint16_t* out) {
  const uint4 bytes = reinterpret_cast<const uint4*>(packed)[block];
  const float s = e8m0(scale[block]);
  const uint32_t words[4] = {bytes.x, bytes.y, bytes.z, bytes.w};
  uint32_t result[16];
#pragma unroll
  for (int w = 0; w < 4; ++w) {
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      const uint32_t byte = (words[w] >> (8 * b)) & 0xFF;
      const uint32_t lo = to_bf16_bits(kE2m1[byte & 0x0F] * s);
      const uint32_t hi = to_bf16_bits(kE2m1[byte >> 4] * s);
      result[w * 4 + b] = lo | (hi << 16);  // even column first in memory (little endian)
    }
  }
  uint4* dst = reinterpret_cast<uint4*>(out + block * kBlock);
#pragma unroll
  for (int q = 0; q < 4; ++q) dst[q] = make_uint4(result[4 * q], result[4 * q + 1], result[4 * q + 2], result[4 * q + 3]);
}

__global__ void dequant_table_kernel(const uint64_t* packed_table, const uint64_t* scale_table, const int64_t* active, int64_t blocks,
                                     int64_t matrix_elems, uint16_t* out) {
  const int64_t m = blockIdx.y;
  if (active != nullptr && active[m] == 0) return;
  const auto* packed = reinterpret_cast<const uint8_t*>(packed_table[m]);
  const auto* scale = reinterpret_cast<const uint8_t*>(scale_table[m]);
  for (int64_t b = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; b < blocks;
       b += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dequant_block(packed, scale, b, out + m * matrix_elems);
  }
}

__global__ void dequant_one_kernel(const uint8_t* packed, const uint8_t* scale, int64_t blocks, uint16_t* out) {
  for (int64_t b = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; b < blocks;
       b += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dequant_block(packed, scale, b, out);
  }
}

bool valid_shape(int64_t rows, int64_t cols) { return rows > 0 && cols > 0 && cols % kBlock == 0; }

unsigned grid_for(int64_t blocks) {
  const int64_t grid = (blocks + kThreads - 1) / kThreads;
  return static_cast<unsigned>(grid < 4096 ? grid : 4096);
}

}  // namespace

cudaError_t dequant_fp4_to_bf16(const uint64_t* packed_table, const uint64_t* scale_table, const int64_t* active, int64_t count,
                                int64_t rows, int64_t cols, uint16_t* out, cudaStream_t stream) {
  if (!valid_shape(rows, cols) || count > 65535) return cudaErrorInvalidValue;
  if (count <= 0) return cudaSuccess;
  const int64_t blocks = rows * cols / kBlock;
  const dim3 grid(grid_for(blocks), static_cast<unsigned>(count));
  dequant_table_kernel<<<grid, kThreads, 0, stream>>>(packed_table, scale_table, active, blocks, rows * cols, out);
  return cudaGetLastError();
}

cudaError_t dequant_fp4_to_bf16_one(const uint8_t* packed, const uint8_t* scale, int64_t rows, int64_t cols, uint16_t* out,
                                    cudaStream_t stream) {
  if (!valid_shape(rows, cols)) return cudaErrorInvalidValue;
  const int64_t blocks = rows * cols / kBlock;
  dequant_one_kernel<<<grid_for(blocks), kThreads, 0, stream>>>(packed, scale, blocks, out);
  return cudaGetLastError();
}

}  // namespace deepinfer::model::cuda
