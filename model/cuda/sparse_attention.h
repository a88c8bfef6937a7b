#pragma once
// DeepSeek-V4 attention core read in place from the paged state (model/attention_group.h is
// the ATen reference): for each query row at position t of a run that starts at position s,
// the keys are
//   - the window, positions max(0, t-W+1)..t: from the state slot's ring (row p % W) for p < s,
//     from the step's new KV rows for p >= s;
//   - the compressed entries through the block table (entry w of ratio m lives in block
//     table[w m / 128], row w % (128 / m)): all w < (t+1)/m (HCA), or the indexer's picks (CSA,
//     -1 for none);
// V = K, one KV head shared by all heads (MQA), the per-head sink in the softmax denominator.
// Plain CUDA, no torch types: bfloat16 in and out, float32 softmax and accumulation, bf16
// tensor-core MMA (mma.sync m16n8k16). With 33..64 heads, one thread block per (query row, split
// of 320 of its keys; more per split where a row would need more than 16 splits) holds all the
// heads, so a key is read once per row; the splits of a row with more keys are merged by a second
// kernel in split order (rows in batches whose partials fit 256 MB). On Hopper (compute capability
// 9.0) with D 512 the split blocks run on wgmma instead (sparse_attention_sm90.h), and the two
// splits of a row merge inside a thread-block cluster, their partials never written to device
// memory. Otherwise one block per (query row, 16 heads). Either way the keys stream through shared memory in tiles of 64 in a
// fixed order with an online softmax, and a row's splits depend on its own key count, so its
// result depends on its own keys only, never on the batch (batch-invariant by construction).

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace deepinfer::model::cuda {

struct SparseAttentionArgs {
  const __nv_bfloat16* q = nullptr;        // [rows, H, D]: the step's query rows
  const __nv_bfloat16* kv = nullptr;       // [rows, D]: the step's new KV rows
  const __nv_bfloat16* ring = nullptr;     // [num_slots, W, D]: each slot's window ring (as before the step)
  const __nv_bfloat16* entries = nullptr;  // [num_blocks, 128 / ratio, D] compressed entries; null when ratio == 0
  const int64_t* query_rows = nullptr;     // [B * L] the flat rows (of q, kv and out) of each sequence's L queries
  const int64_t* start = nullptr;          // [B] position of each run's first query
  const int64_t* slots = nullptr;          // [B] state slots
  const int64_t* block_tables = nullptr;   // [B, block_stride] block ids
  const int64_t* picks = nullptr;          // [B * L, num_picks] CSA entry ids or -1; null for HCA (all visible entries)
  const float* sink = nullptr;             // [H]
  __nv_bfloat16* out = nullptr;            // [rows, H, D]: written at query_rows
  float* workspace = nullptr;              // sparse_attention_workspace_bytes(args) bytes (null when 0)
  int64_t max_entries = 0;                 // HCA: the most visible entries of any row, 0: all the block tables hold
  int64_t first_query = 0;                 // set by sparse_attention(): the first row of one launch
  int64_t num_seqs = 0;                    // B
  int64_t len = 0;                         // L queries per sequence
  int64_t block_stride = 0;
  int64_t num_picks = 0;
  int heads = 0;       // H
  int head_dim = 0;    // D: 64, 128, 256 or 512
  int window = 0;      // W
  int ratio = 0;       // m: 0 (window only) or a divisor of 128
  float scale = 0.0f;  // softmax scale (1 / sqrt(D))
  int64_t q_rows = 0;  // rows of q: above every row query_rows names, at most 2^31 - 1
  // Hopper, CSA and window-only calls of at most kHeadsMaxKeys keys: the head-split kernel
  // (sparse_attention_heads.h) instead of the split kernel. Under test: off in the forward until
  // it is measured faster (docs/kernel-notes.md, seventeenth session).
  bool head_split = false;
  // CSA: picks hold rows of `entries` ([num_blocks * 128 / ratio] rows; -1 none) instead of entry
  // ids, the block table applied where they were made (index_topk.h), so a pick's key takes one
  // dependent read less. Last, so that a struct without it is a prefix (attention_micro's reference).
  bool picks_are_rows = false;
  // q and the indices query_rows, start and slots were written before the launch just before this
  // one, and that launch waits for its own predecessors before it lets this one start (a plain
  // launch, or a programmatic dependent that waits first, as these kernels are): the Hopper split
  // kernel then loads q, and prefetches each split's first window rows into the L2, before it
  // waits for that launch. Last, as picks_are_rows.
  bool early_inputs = false;
};

// The scratch a call needs (the split rows' partial outputs), 0 when none.
size_t sparse_attention_workspace_bytes(const SparseAttentionArgs& args);

// cudaErrorInvalidValue for an unsupported head_dim or ratio or a null pointer it needs; else
// the launch's error.
cudaError_t sparse_attention(const SparseAttentionArgs& args, cudaStream_t stream);

}  // namespace deepinfer::model::cuda
