#pragma once
// SequenceGroup: B sequences that each bring the same number L of query tokens, the unit the
// attention, the compressors and the cache updates work on as [B, L, ...] tensors.
// make_groups() makes the tensors of the groups the batch laid out (ForwardBatch::groups: every
// length-1 run, decode steps, in one batched group, every longer run, a prefill chunk, in a group
// of its own) from its staged index, on the device, without a host copy.
// Owns: the per-group index tensors. Does not own: the batch or the cache.

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "model/forward_batch.h"

namespace deepinfer::model {

struct SequenceGroup {
  int64_t num_seqs = 0;     // B
  int64_t len = 0;          // L
  int64_t max_end = 0;      // host: max over the group of (first position + L); static shapes: the block tables' capacity
  at::Tensor rows;          // [B * L] int64 flat token rows, sequence-major
  at::Tensor start;         // [B] int64 position of each run's first token
  at::Tensor positions;     // [B, L] int64
  at::Tensor block_tables;  // [B, max_blocks] int64 block ids
  at::Tensor slots;         // [B] int64 state slots
};

std::vector<SequenceGroup> make_groups(const ForwardBatch& batch);

}  // namespace deepinfer::model
