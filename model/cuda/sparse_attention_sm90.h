#pragma once
// The paged attention's split kernel on Hopper (sm_90a: wgmma), for head_dim 512 and 33..64 heads:
// the same rows, splits, partials and outputs as the split kernel of sparse_attention.cu, which
// calls it where it runs (sparse_attention.h says what is computed). One block per (query row,
// split), two warpgroups: the first scores a tile of 64 keys for all 64 heads (wgmma m64n64k16,
// q and keys from shared memory), keeps the online softmax and hands the probabilities to the
// second through shared memory; each then adds P V for half of the 512 output dims (wgmma
// m64n256k16, V = the same key tile read transposed). Two key buffers: q comes in by the
// tensor-memory accelerator (a tensor map of q made per launch), every warp copies its rows of tile
// 0, then the second warpgroup copies each next tile into the buffer both groups have just
// finished (cp.async completing on an mbarrier), while the first scores; the groups hand over
// through named barriers, never a block barrier. A row of two splits merges in its cluster: each
// split sends the other the partials of the other's heads through distributed shared memory
// (st.async, completing on the owner's mbarrier), and all eight warps of the owner merge. Each
// launch is a programmatic dependent of the stream's previous kernel: its blocks wait for that
// kernel before they read anything, and let the next kernel launch once their tiles are done.

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "model/cuda/sparse_attention.h"

namespace deepinfer::model::cuda {

// Whether sm90_split_attention runs this call: head_dim 512, 33..64 heads, each split within
// the keys a block holds, the current device of compute capability 9.0.
bool sm90_attention_supported(const SparseAttentionArgs& a);

// Whether a launch of max_splits blocks per row merges its splits itself: one thread-block cluster
// per row (2..8 splits), the partials exchanged through distributed shared memory, never written
// to device memory; the same arithmetic as the merge kernel of sparse_attention.cu.
bool sm90_attention_merges(int64_t max_splits);

// One launch over rows a.first_query .. + rows - 1, max_splits blocks per row: rows with one split
// write their output; the others are merged in the launch (sm90_attention_merges) or leave their
// partials in a.workspace for the merge kernel of sparse_attention.cu.
cudaError_t sm90_split_attention(const SparseAttentionArgs& a, int64_t max_splits, unsigned rows, cudaStream_t stream);

// The tensor map of q ([a.q_rows][a.heads][512] bfloat16) in boxes of 64 dims x box_heads heads,
// 128-byte swizzled, heads past a.heads read as zeros: what the Hopper kernels bring q in by.
// cudaErrorNotSupported where the driver has no tensor-map encoder.
cudaError_t sm90_q_tensor_map(const SparseAttentionArgs& a, int box_heads, CUtensorMap& map);

}  // namespace deepinfer::model::cuda
