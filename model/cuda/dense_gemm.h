#pragma once
// Batch-invariant dense GEMMs for the forward's linears: y[M, N] = x[M, K] W[N, K]^T, where every
// output element (m, n) is computed with the same instructions in the same order whatever M is
// and wherever row m sits, so a row's bits never depend on the rows batched with it. No split-K;
// the tile configuration is chosen from (M, N, K) for speed, and every configuration runs the
// same per-element arithmetic (docs/kernel-notes.md, "Batch-invariant dense GEMM"). Plain CUDA,
// no torch types; the ATen binding is model/cuda/kernels.h invariant_linear().
//
// bfloat16 (tensor cores, mma.sync m16n8k16, sm_80+), float32 sums. The reduction dimension is
// taken in units of 32 values; in unit u the element's two k16 steps are, in this order, step
// h = 0, 1 over the values 32 u + 8 t + 4 h + {0, 1, 2, 3} for t = 0..3 (the MMA's k slots 2t,
// 2t + 1, 2t + 8, 2t + 9 of quad thread t), x as the MMA's A operand (rows = tokens) and W as B
// (columns = features); one float32 accumulator from 0 through the K / 16 steps, then rounded
// once to the output type. Tokens past M and features past N are never stored.
//
// float32 (CUDA cores, for the router and the mHC projection): K is cut into chunks of
// L = 16 ceil(K / 4096) values (at most 256 chunks, the last one shorter); chunk c's partial is
// a sequential fma chain over its k from 0, and y = ((0 + p_0) + p_1) + ... in chunk order.
//
// Requirements (else cudaErrorInvalidValue): M >= 0 (0: nothing to do), N >= 1, M and N below
// 2^31 - 256; x and W non-null with unit inner stride, 16-byte aligned, row strides (in elements) >= K
// and a multiple of 8 (bfloat16) or 4 (float32); y non-null, aligned to its element, ldy >= N.
// bfloat16: K a positive multiple of 32. float32: K a positive multiple of 4.

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace deepinfer::model::cuda {

struct DenseGemmBf16Args {
  const __nv_bfloat16* x = nullptr;  // [M, K], row stride ldx
  const __nv_bfloat16* w = nullptr;  // [N, K], row stride ldw
  void* y = nullptr;                 // [M, N], row stride ldy: bfloat16, or float32 when out_float32
  int64_t ldx = 0, ldw = 0, ldy = 0;
  int64_t m = 0, n = 0, k = 0;
  bool out_float32 = false;
};

struct DenseGemmF32Args {
  const float* x = nullptr;  // [M, K], row stride ldx
  const float* w = nullptr;  // [N, K], row stride ldw
  float* y = nullptr;        // [M, N], row stride ldy
  int64_t ldx = 0, ldw = 0, ldy = 0;
  int64_t m = 0, n = 0, k = 0;
};

// Whether the kernels take N and K (the pointer and stride rules above are checked per call).
bool dense_gemm_bf16_shape_supported(int64_t n, int64_t k);
bool dense_gemm_f32_shape_supported(int64_t n, int64_t k);

// The name of the tile configuration a call of these sizes runs on a device with `sms`
// multiprocessors (for benchmarks; the choice never changes the result's bits).
const char* dense_gemm_bf16_plan(int64_t m, int64_t n, int64_t k, int sms);
const char* dense_gemm_f32_plan(int64_t m, int64_t n, int64_t k, int sms);

// cudaErrorInvalidValue for what the rules above exclude; else the launch's error.
cudaError_t dense_gemm_bf16(const DenseGemmBf16Args& args, cudaStream_t stream);
cudaError_t dense_gemm_f32(const DenseGemmF32Args& args, cudaStream_t stream);

}  // namespace deepinfer::model::cuda
