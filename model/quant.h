#pragma once
// Block-scaled FP8 (e4m3) and FP4 (e2m1) weights as DeepSeek-V4 checkpoints store them.
// Owns: decoding and encoding the codes and their e8m0 power-of-two scales with plain ATen
// ops (lookup tables via index_select), so the same code runs on CPU and CUDA tensors.
// Does not own: reading bytes from files (checkpoint_loader.h) or choosing which tensors are
// quantized (weight_specs.h).
//
// Bytes are uint8 tensors (LibTorch 1.13 has no float8 dtypes).
//   e4m3: sign bit 7, exponent bits 6..3 (bias 7), mantissa bits 2..0; no infinities;
//         0x7F / 0xFF are NaN; exponent 0 holds subnormals m/8 * 2^-6; largest finite 448.
//   e2m1: 4-bit code, bit 3 = sign; table [0,.5,1,1.5,2,3,4,6,-0,-.5,-1,-1.5,-2,-3,-4,-6];
//         two codes per byte, the LOW nibble holds the even column.
//   e8m0: scale 2^(byte-127); 0xFF is NaN.
// Quantization uses the ue8m0 scale 2^ceil(log2(amax/qmax)) per block (qmax 448 for e4m3, 6 for
// e2m1) and rounds to the nearest code, ties to the even code. An all-zero block gets scale 1.

#include <ATen/ATen.h>

#include <cstdint>
#include <utility>

namespace deepinfer::model {

inline constexpr int64_t kFp8Block = 128;
inline constexpr int64_t kFp4Block = 32;
inline constexpr double kFp8Max = 448.0;
inline constexpr double kFp4Max = 6.0;

// Decoded values of every byte: [256] float32 on the given device.
at::Tensor e4m3_table(at::Device device);
at::Tensor e8m0_table(at::Device device);
// [16] float32: the e2m1 codes.
at::Tensor e2m1_table(at::Device device);

// weight [..., out, in] uint8 e4m3, scale [..., ceil(out/block), ceil(in/block)] uint8 e8m0
// -> [..., out, in] out_dtype. Computed in fp32 (exact: a code times a power of two), then cast.
at::Tensor dequant_fp8_blockwise(const at::Tensor& weight, const at::Tensor& scale, at::ScalarType out_dtype, int64_t block = kFp8Block);
// The same with the scale already decoded: float32 [..., ceil(out/block), ceil(in/block)], the
// form FP8 linears are held in (weights.h) and cuda::fp8_linear reads. The same bits.
at::Tensor dequant_fp8_scaled(const at::Tensor& weight, const at::Tensor& scale, at::ScalarType out_dtype, int64_t block = kFp8Block);
// e8m0 bytes -> their float32 values 2^(byte - 127), same shape.
at::Tensor decode_e8m0(const at::Tensor& scale);

// packed [..., out, in/2] uint8 (low nibble = even column), scale [..., out, ceil(in/block)] uint8 e8m0
// -> [..., out, in] out_dtype with in = 2 * packed.size(-1).
at::Tensor dequant_fp4(const at::Tensor& packed, const at::Tensor& scale, at::ScalarType out_dtype, int64_t block = kFp4Block);

// weight [..., out, in] floating -> (codes [..., out, in] uint8 e4m3, scale [..., ceil(out/block),
// ceil(in/block)] uint8 e8m0). Throws on non-finite input.
std::pair<at::Tensor, at::Tensor> quantize_fp8_blockwise(const at::Tensor& weight, int64_t block = kFp8Block);

// weight [..., out, in] floating, in even -> (packed [..., out, in/2] uint8, scale [..., out,
// ceil(in/block)] uint8 e8m0). Throws on non-finite input or odd in.
std::pair<at::Tensor, at::Tensor> quantize_fp4(const at::Tensor& weight, int64_t block = kFp4Block);

// DeepSeek-V4's activation quantizer for the FP8 linears (the official inference's act_quant(x,
// 128, scale_fmt="ue8m0"), deepseek-v4.md §2.10): x [..., K] floating -> (codes [..., K] uint8
// e4m3, scales [..., ceil(K/block)] float32). Per row and block of `block` columns (the last one
// may be partial): amax = the float32 max |x|, at least kFp8ActAmaxFloor (so an all-zero block
// gets 2^-22, not 1); scale = 2^e, the ue8m0 scale above (the smallest e with 448 2^e >= amax,
// which the official kernel computes as 2^ceil(log2(amax * float32(1/448))): the same e for every
// float32 amax >= 1e-4, checked exhaustively); code = x / scale (exact) to the nearest e4m3 code,
// ties to the even code. Rows are independent. The reference of the CUDA kernel
// (model/cuda/act_quant.h) and the CPU path. Throws on non-finite input.
inline constexpr float kFp8ActAmaxFloor = 1e-4f;
std::pair<at::Tensor, at::Tensor> quantize_fp8_activations(const at::Tensor& x, int64_t block = kFp8Block);

}  // namespace deepinfer::model
