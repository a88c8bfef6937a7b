#pragma once
// CSA's pick: the top k of each row of the indexer's scores (index_scores.h), with a fixed tie
// rule: of equal scores the lower entry index wins (the order of a stable descending sort).
// Entries scored -inf (not visible) are never picked; a row with fewer than k visible entries
// gets them all and -1 for the rest. A row's picks are written in ascending entry order (the
// attention then reads the paged entries in block order). -0.0 counts as 0.0.
// One thread block per row: a radix select on the scores' bits (four 8-bit passes) finds the
// k-th largest score and how many of its ties are taken, then one ordered pass writes the picks.
// Everything a row computes depends on its own scores only (batch-invariant). Plain CUDA, no
// torch types.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace deepinfer::model::cuda {

struct IndexTopkArgs {
  const float* scores = nullptr;  // [rows, entries]
  int64_t* picks = nullptr;       // [rows, k]: entry ids ascending, then -1
  int64_t rows = 0;
  int64_t entries = 0;
  int64_t k = 0;
  // Optional: the picks as rows of the paged entries (SparseAttentionArgs::picks_are_rows)
  // instead of entry ids: row r's sequence is r / rows_per_seq, and entry e of ratio m lives in
  // row block_tables[seq * block_stride + e m / 128] * (128 / m) + e % (128 / m). Same order, -1 kept.
  const int64_t* block_tables = nullptr;  // [rows / rows_per_seq, block_stride] block ids
  int64_t block_stride = 0;
  int64_t rows_per_seq = 0;
  int ratio = 0;  // m, a divisor of 128
};

// cudaErrorInvalidValue for a null pointer, k < 1 or negative sizes; else the launch's error.
cudaError_t index_topk(const IndexTopkArgs& args, cudaStream_t stream);

}  // namespace deepinfer::model::cuda
