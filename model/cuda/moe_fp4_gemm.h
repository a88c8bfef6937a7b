#pragma once
// A layer's routed experts straight from packed FP4 (W4A16): grouped GEMMs that stream each
// expert's e2m1 weights and e8m0 scales from HBM once, dequantize them in registers to bfloat16
// and multiply on bf16 tensor cores with float32 accumulation. No dequantized copy of a weight
// exists anywhere. The ATen reference is ExpertWorkspace's dequantize-then-at::_grouped_mm path
// (model/moe_grouped.h); this computes the same arithmetic:
//   h = bf16(x w1^T), bf16(x w3^T)                       (float32 sums, one rounding each)
//   act = bf16(bf16(silu(min(h1, L))) * clamp(h3, -L, L))   (no clamp when swiglu_limit <= 0)
//   y = bf16(act w2^T); per pair y * routing weight (float32); per token the k slots summed in
//   slot order in float32; pairs of experts outside [first_expert, first_expert + E) add nothing.
// Plain CUDA, no torch types; the GEMMs are sm_90a code (Hopper's wgmma): compute capability 9.0.
//
// Layouts. Expert e of the tables is expert first_expert + e. One FP4 matrix [rows, cols] is
// packed [rows, cols / 2] uint8 (the low nibble the even column) and scale [rows, cols / 32]
// uint8 e8m0 (2^(s - 127)); w1 and w3 are [I, D], w2 is [D, I]; every packed matrix 16-byte
// aligned. x [tokens, D] bfloat16, contiguous, 16-byte aligned. D and I multiples of 128.
//
// Scale bytes 59..192 give the exact dequantized products (the kernel multiplies the weights by
// 2^-64 and x by 2^64, which cancel exactly): below that a weight's magnitude is under 2^-67
// and flushes towards zero, above it (and the e8m0 NaN, 255) the results are inf or NaN.
// Activations must stay below 2^64 in magnitude for the same reason.
//
// Work: one block sorts the (token, slot) pairs of owned experts by expert (a stable counting
// sort, no atomics, no host read) and cuts each expert's rows into tiles on the device: up to 8
// rows (decode: mma.sync m16n8k16 per warp, the tile's rows in shared memory, weights streamed
// once through a register ring) or up to 128 (prefill: wgmma m64nRk16 with the weights as the
// register operand and the tile's rows, R = rows rounded up to 16, brought into shared memory by
// bulk copies from an "image" the gather wrote; two warpgroups multiply while one warp copies).
// Both regimes run the same k16 steps in the same order for every output element, and
// mma.sync and wgmma give such an element the same bits, so a pair's result does not depend on
// how many rows its expert got or where they sit (bitwise; tests/model/moe_fp4_cuda_test.cpp).
// Grids are persistent and sized on the host from bounds alone. Launches: the sort and the gather
// of the prefill rows (more than 8 pairs), gate/up (decode tiles, then prefill tiles), down (the
// same), the sum over slots (each pair's bf16 y times its routing weight); all but the sort and the
// gather are programmatic dependents of the one before (their blocks start while it ends). With
// at most 8 pairs (decode at batch 1) there is no sort: each decode block finds its tile from the
// routing.

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace deepinfer::model::cuda {

struct MoeFp4Args {
  const uint64_t* w13_packed = nullptr;    // [2E] device pointers: expert e's w1 at 2e, its w3 at 2e + 1
  const uint64_t* w13_scale = nullptr;     // [2E]
  const uint64_t* w2_packed = nullptr;     // [E]
  const uint64_t* w2_scale = nullptr;      // [E]
  const __nv_bfloat16* x = nullptr;        // [tokens, D]
  const int64_t* experts = nullptr;        // [tokens, k] expert ids
  const float* routing_weights = nullptr;  // [tokens, k]
  void* workspace = nullptr;               // moe_fp4_workspace_bytes(args) bytes, 256-byte aligned
  float* out = nullptr;                    // [tokens, D] float32; [tokens, k, D] when per_slot
  int64_t tokens = 0;
  int64_t k = 0;
  int64_t hidden = 0;        // D
  int64_t intermediate = 0;  // I
  int64_t first_expert = 0;
  int64_t num_experts = 0;  // E: the experts this rank owns
  float swiglu_limit = 0.0f;
  // Each pair's weighted output into out [tokens, k, D] (0 for pairs of experts not owned) instead
  // of their sum: a token's slots can then be summed after the exchange between ranks, in an
  // order that does not depend on which rank owns which expert (model/batch_invariant.h).
  bool per_slot = false;
};

// Whether the kernels take D, I and E (owned experts): D and I multiples of 128 up to 12,288
// (the decode kernel keeps 8 rows of the reduction dimension in shared memory), E from 1 to
// 1,024 (the sort keeps 33 E counters in shared memory).
bool moe_fp4_shape_supported(int64_t hidden, int64_t intermediate, int64_t experts);

// The scratch a call needs: the sorted pairs and the tile lists, the images of the prefill tiles'
// x rows (more than 8 pairs) and every tile's activations (a prefill tile's rows rounded up to 16:
// at most tokens k + 15 min(E, tokens k / 9) rows of D and of I bfloat16), and each pair's output
// before its routing weight [tokens k, D] bfloat16.
size_t moe_fp4_workspace_bytes(const MoeFp4Args& args);

// cudaErrorInvalidValue for unsupported shapes or a missing pointer; else the first launch error.
cudaError_t moe_fp4(const MoeFp4Args& args, cudaStream_t stream);

}  // namespace deepinfer::model::cuda
