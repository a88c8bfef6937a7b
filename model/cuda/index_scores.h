#pragma once
// CSA's lightning-indexer scores read in place from the paged index keys (the ATen reference:
// Arithmetic::index_scores over gathered keys, model/arithmetic.h): for query row i (sequence b,
// query l at position t = start[b] + first + l) and entry e < E,
//   score[i][e] = sum_h relu(bf16(q_h . k_e)) (w_h / sqrt(H)) / sqrt(D)   if e < (t + 1) / ratio
//               = -inf                                                       otherwise,
// with k_e in block table[e ratio / 128], row e % (128 / ratio). The dot products run on bf16
// tensor cores (mma.sync m16n8k16, float32 accumulation) and are rounded to bf16 as the official
// arithmetic rounds its matmul; the head sum is float32 in a fixed order. A row's scores depend
// only on its own inputs (batch-invariant). Plain CUDA, no torch types.

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace deepinfer::model::cuda {

struct IndexScoresArgs {
  const __nv_bfloat16* q = nullptr;       // [B, L, H, D] the queries, roped
  const float* weights = nullptr;         // [B, L, H] the raw head weights
  const __nv_bfloat16* keys = nullptr;    // [num_blocks, 128 / ratio, D] paged index keys
  const int64_t* start = nullptr;         // [B] position of each run's first query
  const int64_t* block_tables = nullptr;  // [B, block_stride]
  float* scores = nullptr;                // [B, L, E]
  int64_t num_seqs = 0;                   // B
  int64_t len = 0;                        // L queries per sequence in this call
  int64_t first = 0;                      // the calls' queries are the run's first + 0 .. L - 1
  int64_t entries = 0;                    // E
  int64_t block_stride = 0;
  int heads = 0;  // H: 16, 32, 48 or 64
  int dim = 0;    // D: 32, 64 or 128
  int ratio = 0;  // a divisor of 128
};

// cudaErrorInvalidValue for unsupported heads, dim or ratio or a null pointer; else the launch's.
cudaError_t index_scores(const IndexScoresArgs& args, cudaStream_t stream);

}  // namespace deepinfer::model::cuda
