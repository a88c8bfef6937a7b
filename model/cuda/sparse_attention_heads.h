#pragma once
// The paged attention on Hopper (sm_90a) for rows of at most 640 keys whose key count is fixed by
// the layer (CSA: window + picks; the sliding window alone), head_dim 512, 33..64 heads: no split
// of a row's keys and so no merge. A row's two thread blocks each own half of its heads (32) and
// read all of its keys; the keys are wgmma's M: scores S^T = K q^T (m64n32k16, both operands
// K-major in shared memory) and the output O^T += V^T P^T (the key tile read transposed as A, P^T
// written to shared memory as B). Three warpgroups: a copying one fills a ring of quarter tiles
// (64 keys x 128 dims, cp.async onto mbarriers) ahead of the others; warpgroup 0 scores each tile,
// runs the online softmax (a head's max across its four warps through shared memory) and adds
// P V for dims 0..255; warpgroup 1 adds P V for dims 256..511 with warpgroup 0's P^T and factors.
// q comes in by the tensor-memory accelerator; launches are programmatic dependents.
// sparse_attention.h says what is computed; the result of a row depends on its own keys only (the
// same tiles, order and rounding whatever the batch).
// Not yet run on the GPU in this form: sparse_attention() calls it only for calls that set
// SparseAttentionArgs::head_split (docs/kernel-notes.md, seventeenth session).

#include <cuda_runtime_api.h>

#include "model/cuda/sparse_attention.h"

namespace deepinfer::model::cuda {

// The most keys of a row the head-split kernel holds (10 tiles of 64).
constexpr int kHeadsMaxKeys = 640;

// Whether sm90_heads_attention runs this call: the split kernel's conditions
// (sm90_attention_supported), no HCA (its rows' key counts vary with position), and a window plus
// picks within kHeadsMaxKeys.
bool sm90_heads_attention_supported(const SparseAttentionArgs& a);

// One launch over every row of the call (a.first_query ignored), two blocks per row.
cudaError_t sm90_heads_attention(const SparseAttentionArgs& args, cudaStream_t stream);

}  // namespace deepinfer::model::cuda
