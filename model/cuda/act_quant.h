#pragma once
// The FP8 linears' activation quantizer (DeepSeek-V4's act_quant(x, 128, scale_fmt="ue8m0")):
// bfloat16 rows to e4m3 codes with one power-of-two float32 scale per row and 128 columns, the
// input of the block-scaled FP8 GEMM (fp8_gemm.h). Plain CUDA, no torch types. The ATen reference
// is quantize_fp8_activations in model/quant.h; this produces the same bits for finite input:
//   amax = max |x| over the block (float32, exact), at least 1e-4f;
//   e = ceil(log2(amax * float32(1/448))) from the float32's bits (the official fast_log2_ceil;
//       for every float32 amax >= 1e-4 the smallest e with 448 2^e >= amax, as quant.h defines);
//   scale = 2^e; code = cvt.rn.satfinite.e4m3(x * 2^-e) (exact product, round to nearest even).
// Each row depends on its own values only (no batch dependence). Non-finite input gives
// unspecified codes.
//
// Layout: x [rows, cols] bfloat16, row-major, 8-byte aligned; codes [padded_rows, cols] uint8,
// 4-byte aligned: rows from `rows` to `padded_rows` are written as zero codes with scale 1 (the
// GEMM's row padding); scales: block b of row r at scales[r * scale_row_stride + b *
// scale_block_stride] (fp8_gemm.h wants row stride 1 and block stride padded_rows). cols a
// multiple of 4 (a lane's 4 columns are all in or all out of a partial last block).

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace deepinfer::model::cuda {

inline constexpr int64_t kActQuantBlock = 128;  // columns per scale (quant.h kFp8Block)

struct ActQuantArgs {
  const __nv_bfloat16* x = nullptr;  // [rows, cols]
  uint8_t* codes = nullptr;          // [padded_rows, cols]
  float* scales = nullptr;           // see the layout above
  int64_t rows = 0;
  int64_t padded_rows = 0;  // >= rows
  int64_t cols = 0;
  int64_t scale_row_stride = 0;
  int64_t scale_block_stride = 0;
};

// cols > 0 and a multiple of 4.
bool act_quant_shape_supported(int64_t cols);

// cudaErrorInvalidValue for an unsupported shape, a missing pointer or misaligned x / codes; else
// the launch's error. Nothing to do (padded_rows 0) is success.
cudaError_t act_quant(const ActQuantArgs& args, cudaStream_t stream);

}  // namespace deepinfer::model::cuda
