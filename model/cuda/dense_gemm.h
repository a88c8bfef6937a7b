#pragma once
// Batch-invariant dense GEMMs for the forward's linears: y[M, N] = x[M, K] W[N, K]^T, where every
// output element (m, n) is computed with the same instructions in the same order whatever M is
// and wherever row m sits, so a row's bits never depend on the rows batched with it. The
// reduction is split into S = dense_gemm_bf16_splits(N, K, groups) ranges, a function of the
// weights' shape alone (so small-N weights stream through enough blocks at decode, and M never changes
// it); the tile configuration is chosen from (M, N, K) for speed, and every configuration runs
// the same per-element arithmetic (docs/kernel-notes.md, "Batch-invariant dense GEMM"). Plain
// CUDA, no torch types; the ATen bindings are model/cuda/kernels.h invariant_linear() and
// invariant_group_linear().
//
// bfloat16 (tensor cores, mma.sync m16n8k16, sm_80+), float32 sums. The reduction dimension is
// taken in units of 32 values; in unit u the element's two k16 steps are, in this order, step
// h = 0, 1 over the values 32 u + 8 t + 4 h + {0, 1, 2, 3} for t = 0..3 (the MMA's k slots 2t,
// 2t + 1, 2t + 8, 2t + 9 of quad thread t), x as the MMA's A operand (rows = tokens) and W as B
// (columns = features). Range s holds units [s U, min(K / 32, (s + 1) U)), U = ceil(K / 32 / S);
// its float32 sum p_s starts at 0 and takes the range's k16 steps in order; the element is
// ((p_0 + p_1) + ...) + p_{S-1} in float32 (just p_0 when S = 1), rounded once to the output
// type. Tokens past M and features past N are never stored.
//
// Groups: `groups` GEMMs of one shape in one launch, group g reading x + g gx and W + g gw and
// writing y + g gy (element offsets), e.g. the grouped output projection.
//
// float32 (CUDA cores, for the router, the mHC projections and the invariant RMSNorm): K is cut
// into S = ceil(K / 512) ranges of 512 values (the last one shorter); range s's partial p_s is a
// sequential fma chain over its k from 0, and y = ((p_0 + p_1) + ...) + p_{S-1} in range order.
//
// Requirements (else cudaErrorInvalidValue): M >= 0 (0: nothing to do), N >= 1, M and N below
// 2^31 - 256; x and W non-null with unit inner stride, 16-byte aligned, row strides (in elements) >= K
// and a multiple of 8 (bfloat16) or 4 (float32); y non-null, aligned to its element, ldy >= N.
// bfloat16: K a positive multiple of 32; groups 1..65535, gx, gw, gy >= 0; the workspace where
// S > 1. float32: K a positive multiple of 4; the workspace where S > 1.

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
  int64_t groups = 1, gx = 0, gw = 0, gy = 0;  // gx and gw multiples of 8
  float* workspace = nullptr;                  // dense_gemm_bf16_workspace_bytes(m, n, k, groups) bytes, 8-byte aligned (none when 0)
};

struct DenseGemmF32Args {
  const float* x = nullptr;  // [M, K], row stride ldx
  const float* w = nullptr;  // [N, K], row stride ldw
  float* y = nullptr;        // [M, N], row stride ldy
  int64_t ldx = 0, ldw = 0, ldy = 0;
  int64_t m = 0, n = 0, k = 0;
  float* workspace = nullptr;  // dense_gemm_f32_workspace_bytes(m, n, k) bytes (none when 0)
};

// S, the reduction's ranges for `groups` weights of N x K (1..8: as many as bring a one-token call
// to 256 blocks of 64 features, each range at least 512 values), and the float32 scratch a call on the
// current device needs for the ranges' sums (0 when S = 1 or when its blocks add them themselves).
int dense_gemm_bf16_splits(int64_t n, int64_t k, int64_t groups = 1);
int64_t dense_gemm_bf16_workspace_bytes(int64_t m, int64_t n, int64_t k, int64_t groups = 1);
// The float32 GEMM's ranges, S = ceil(K / 512) (dense_gemm_f32.cu), and its scratch for the ranges'
// partials: S M N floats (0 when S = 1).
int dense_gemm_f32_ranges(int64_t k);
int64_t dense_gemm_f32_workspace_bytes(int64_t m, int64_t n, int64_t k);

// Whether the kernels take N and K (the pointer and stride rules above are checked per call).
bool dense_gemm_bf16_shape_supported(int64_t n, int64_t k);
bool dense_gemm_f32_shape_supported(int64_t n, int64_t k);

// The name of the tile configuration a call of these sizes runs on a device with `sms`
// multiprocessors, `wgmma` where it has compute capability 9.0 (for benchmarks; the choice never
// changes the result's bits).
const char* dense_gemm_bf16_plan(int64_t m, int64_t n, int64_t k, int sms, bool wgmma);
const char* dense_gemm_f32_plan(int64_t m, int64_t n, int64_t k, int sms);

// cudaErrorInvalidValue for what the rules above exclude; else the launch's error.
cudaError_t dense_gemm_bf16(const DenseGemmBf16Args& args, cudaStream_t stream);
cudaError_t dense_gemm_f32(const DenseGemmF32Args& args, cudaStream_t stream);

}  // namespace deepinfer::model::cuda
