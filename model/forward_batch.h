#pragma once
// ForwardBatch: the explicit input of one model forward (no global forward context).
// B sequences, each with a contiguous run of query tokens in the flat batch: sequence b owns
// flat rows [query_start[b], query_start[b+1]) at positions start_position[b] + 0, 1, ...
// A run is a prefill chunk (any length) or a decode token (length 1); both may share a batch.
// A sequence appears at most once per batch (its run continues its own cached state).
// Block tables hold block ids per sequence: block i covers positions [128 i, 128 i + 128);
// block 0 and state slot 0 are padding and never belong to a real sequence (the forward
// writes discarded values there). The host vectors mirror the device tensors so shapes and
// loops never read device memory.
// The batch's attention groups (sequence_group.h) are laid out here too: every decode run in one
// group, each longer run in its own, their sequence indices and flat rows staged with the rest.
// With static_shapes, every shape the forward takes depends only on B, T and the block tables'
// width (a group's max_end is the tables' capacity, not its sequences' ends): what a CUDA graph
// replayed over later batches of the same shapes needs (engine/decode_graphs.h).
// Owns: the batch layout and its validation. Does not own: scheduling or block allocation.

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace deepinfer::model {

// Host description of a batch; ForwardBatch::build() makes the device tensors.
struct BatchInput {
  std::vector<std::vector<int64_t>> tokens;        // [B][len_b] query tokens per sequence
  std::vector<int64_t> start_positions;            // [B] position of each run's first token
  std::vector<std::vector<int32_t>> block_tables;  // [B][n_b] block ids (padded with 0)
  std::vector<int32_t> state_slots;                // [B]
  std::vector<int64_t> sample_rows;                // [S] flat token rows to produce logits for
  std::vector<int64_t> score_rows;                 // [P] flat token rows whose final hidden states are also kept (prompt logprobs)
  bool static_shapes = false;                      // see above
};

// One attention group: sequences `seqs` of the batch, each with `len` query tokens; their indices
// are group_index[offset, offset + seqs.size()) and their flat rows (sequence-major) follow.
struct GroupLayout {
  std::vector<int64_t> seqs;
  int64_t len = 0;
  int64_t offset = 0;
};

struct ForwardBatch {
  // Device tensors.
  at::Tensor token_ids;     // [T] int64
  at::Tensor positions;     // [T] int64
  at::Tensor block_tables;  // [B, max_blocks] int32
  at::Tensor state_slots;   // [B] int32
  at::Tensor sample_rows;   // [S] int64, indices into the T flat tokens
  at::Tensor score_rows;    // [P] int64, likewise (DeepseekV4Model::forward_scored)
  at::Tensor group_index;   // [sum of |seqs| (1 + len)] int64: each group's sequence indices, then its rows
  // Host mirrors.
  std::vector<int64_t> query_start;      // [B + 1]
  std::vector<int64_t> start_positions;  // [B]
  int64_t max_blocks = 0;                // block_tables.size(1)
  std::vector<GroupLayout> groups;
  bool static_shapes = false;

  // The batch with its tensors on the host (CPU), checked; device_inputs() lists them for
  // StepStaging::upload, which moves them to the device in one copy.
  static ForwardBatch on_host(const BatchInput& input);
  std::vector<at::Tensor*> device_inputs();
  // on_host(), then each tensor copied to `device` on its own (tests, one-off forwards).
  static ForwardBatch build(const BatchInput& input, at::Device device);

  int64_t num_sequences() const { return static_cast<int64_t>(start_positions.size()); }
  int64_t num_tokens() const { return query_start.empty() ? 0 : query_start.back(); }
  int64_t length(int64_t seq) const { return query_start[seq + 1] - query_start[seq]; }
  int64_t end_position(int64_t seq) const { return start_positions[seq] + length(seq); }
  // Throws (TORCH_CHECK) on inconsistent shapes, empty runs, too short block tables or
  // sample rows out of range.
  void validate() const;
};

}  // namespace deepinfer::model
