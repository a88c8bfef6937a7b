#pragma once
// The KV compressor's update (the ATen reference: model/compressor.h compress_group with the
// official arithmetic) for one group of B sequences with L new rows each, in two kernels:
//  1. entries: for each window w a sequence completes in this run (floor(p/m) <= w <
//     floor((p+L)/m), p its first position), the softmax pool over the window's rows of
//     sum exp(score) kv per channel (CSA, overlap 2: the previous window's first d' channels,
//     then this window's last d'; HCA: this window), RMSNorm with its weight, RoPE on the last
//     r channels at position w m, written as bfloat16 to the paged state: block
//     table[w m / 128], row w % (128 / m). Rows come from the stored tail (positions before
//     p) or from the run; rows before position 0 count as score -inf.
//  2. tail: the open window after the run (and for CSA the complete one before it), kv and
//     score (ape added), written over the sequence's tail slot.
// Float32 throughout, bfloat16 only in the paged write. A sequence's update depends on its own
// rows only (batch-invariant). Plain CUDA, no torch types.

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace deepinfer::model::cuda {

struct CompressorArgs {
  const float* kv_rows = nullptr;      // [B, L, c d'] the run's kv projections
  const float* score_rows = nullptr;   // [B, L, c d'] the run's score projections (no ape)
  const float* ape = nullptr;          // [m, c d'] position bias of a row's slot in its window
  const float* norm_weight = nullptr;  // [d'] float32, or null with norm_weight_bf16
  const __nv_bfloat16* norm_weight_bf16 = nullptr;
  const float* inv_freq = nullptr;        // [r / 2]
  float* tail_kv = nullptr;               // [slots, c m, c d']
  float* tail_score = nullptr;            // [slots, c m, c d'] (ape included)
  __nv_bfloat16* paged = nullptr;         // [blocks, 128 / m, d']
  const int64_t* start = nullptr;         // [B]
  const int64_t* slots = nullptr;         // [B]
  const int64_t* block_tables = nullptr;  // [B, block_stride]
  int64_t num_seqs = 0;                   // B
  int64_t len = 0;                        // L
  int64_t block_stride = 0;
  int ratio = 0;     // m, a divisor of 128
  int overlap = 0;   // c: 1 or 2
  int dim = 0;       // d': even, at most 1024
  int rope_dim = 0;  // r: even, at most d'
  float eps = 0.0f;
};

// cudaErrorInvalidValue for unsupported sizes or a null pointer; else the launches' error.
cudaError_t compress(const CompressorArgs& args, cudaStream_t stream);

}  // namespace deepinfer::model::cuda
