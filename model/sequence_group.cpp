#include "model/sequence_group.h"

#include <algorithm>

#include "model/model_config.h"

namespace deepinfer::model {
namespace {

// The group's tensors: views of the staged group index and gathers on the device (no host copy).
SequenceGroup materialize(const ForwardBatch& batch, const GroupLayout& layout) {
  SequenceGroup group;
  group.num_seqs = static_cast<int64_t>(layout.seqs.size());
  group.len = layout.len;
  for (int64_t b : layout.seqs) group.max_end = std::max(group.max_end, batch.end_position(b));
  if (batch.static_shapes) group.max_end = batch.max_blocks * kBlockTokens;
  const at::Tensor seq_index = batch.group_index.narrow(0, layout.offset, group.num_seqs);
  group.rows = batch.group_index.narrow(0, layout.offset + group.num_seqs, group.num_seqs * group.len);
  group.positions = batch.positions.index_select(0, group.rows).view({group.num_seqs, group.len});
  group.start = group.positions.select(1, 0).contiguous();
  group.block_tables = batch.block_tables.index_select(0, seq_index).to(at::kLong);
  group.slots = batch.state_slots.index_select(0, seq_index).to(at::kLong);
  return group;
}

}  // namespace

std::vector<SequenceGroup> make_groups(const ForwardBatch& batch) {
  std::vector<SequenceGroup> groups;
  groups.reserve(batch.groups.size());
  for (const GroupLayout& layout : batch.groups) groups.push_back(materialize(batch, layout));
  return groups;
}

}  // namespace deepinfer::model
