#pragma once
// Where a compressed entry lives in the paged state: entry w of a sequence with compression ratio
// m (a divisor of 128) is row w % (128 / m) of the block its block-table row names at w m / 128.
// Shared by the kernels that write entries (compressor.cu), read them (sparse_attention_keys.cuh)
// and hand them on as rows (index_topk.cu). Device code only, no torch types.

#include <cstdint>

namespace deepinfer::model::cuda {

// Entry w's row of the paged entries, the sequence's block-table row at tables + first.
__device__ inline int64_t paged_entry_row(const int64_t* tables, int64_t first, int64_t w, int ratio) {
  const int64_t per_block = 128 / ratio;  // a 32-bit division: ratio divides 128
  return tables[first + (w * ratio) / 128] * per_block + w % per_block;
}

}  // namespace deepinfer::model::cuda
