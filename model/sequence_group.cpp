#include "model/sequence_group.h"

#include <algorithm>

namespace deepinfer::model {
namespace {

at::Tensor host_long(const std::vector<int64_t>& values, at::Device device) {
  return at::tensor(values, at::TensorOptions().dtype(at::kLong)).to(device);
}

SequenceGroup select(const ForwardBatch& batch, const std::vector<int64_t>& seqs, int64_t len) {
  const at::Device device = batch.token_ids.device();
  std::vector<int64_t> rows;
  SequenceGroup group;
  group.num_seqs = static_cast<int64_t>(seqs.size());
  group.len = len;
  for (int64_t b : seqs) {
    for (int64_t i = 0; i < len; ++i) rows.push_back(batch.query_start[b] + i);
    group.max_end = std::max(group.max_end, batch.end_position(b));
  }
  const at::Tensor seq_index = host_long(seqs, device);
  group.rows = host_long(rows, device);
  group.positions = batch.positions.index_select(0, group.rows).view({group.num_seqs, len});
  group.start = group.positions.select(1, 0).contiguous();
  group.block_tables = batch.block_tables.index_select(0, seq_index).to(at::kLong);
  group.slots = batch.state_slots.index_select(0, seq_index).to(at::kLong);
  return group;
}

}  // namespace

std::vector<SequenceGroup> make_groups(const ForwardBatch& batch) {
  std::vector<SequenceGroup> groups;
  std::vector<int64_t> decode;
  for (int64_t b = 0; b < batch.num_sequences(); ++b) {
    if (batch.length(b) == 1) {
      decode.push_back(b);
    } else {
      groups.push_back(select(batch, {b}, batch.length(b)));
    }
  }
  if (!decode.empty()) groups.push_back(select(batch, decode, 1));
  return groups;
}

}  // namespace deepinfer::model
