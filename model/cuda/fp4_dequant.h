#pragma once
// CUDA kernels for FP4 (e2m1) routed-expert weights: plain pointers and a stream, no torch types,
// so this compiles with nvcc alone. The ATen reference is dequant_fp4 in model/quant.h; these
// produce the same bits for scale bytes 0..254 (code x 2^(scale-127) is exact in fp32, then one
// round-to-nearest-even to bfloat16). Scale byte 255 (e8m0 NaN) gives NaN on both, but the NaN
// bit patterns differ (0x7FFF here; 0x7FC0 or 0xFFFF from ATen).
//
// Layout (one matrix): packed [rows, cols/2] uint8, the low nibble the even column; scale
// [rows, cols/32] uint8 e8m0; out [rows, cols] bfloat16. cols must be a multiple of 32 and the
// packed rows 16-byte aligned (cols/2 a multiple of 16 and an aligned base).

#include <cstdint>

#include <cuda_runtime_api.h>

namespace deepinfer::model::cuda {

// Dequantizes `count` matrices of equal shape. packed_table / scale_table: device arrays of
// `count` device pointers. Matrix m goes to out + m * rows * cols (bfloat16 elements, as
// uint16_t). When active (device, int64 [count]) is given, matrices whose entry is 0 are skipped.
// cudaErrorInvalidValue for a shape outside the layout above or count > 65535; else the launch's error.
cudaError_t dequant_fp4_to_bf16(const uint64_t* packed_table, const uint64_t* scale_table, const int64_t* active, int64_t count,
                                int64_t rows, int64_t cols, uint16_t* out, cudaStream_t stream);

// One matrix, pointers given directly.
cudaError_t dequant_fp4_to_bf16_one(const uint8_t* packed, const uint8_t* scale, int64_t rows, int64_t cols, uint16_t* out,
                                    cudaStream_t stream);

}  // namespace deepinfer::model::cuda
