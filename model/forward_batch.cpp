#include "model/forward_batch.h"

#include <algorithm>

#include "model/model_config.h"

namespace deepinfer::model {

namespace {

// Every length-1 run in one group (last), every longer run in a group of its own.
std::vector<GroupLayout> group_layout(const ForwardBatch& batch, std::vector<int64_t>& index) {
  std::vector<GroupLayout> groups;
  std::vector<int64_t> decode;
  auto add = [&](std::vector<int64_t> seqs, int64_t len) {
    GroupLayout g{std::move(seqs), len, static_cast<int64_t>(index.size())};
    index.insert(index.end(), g.seqs.begin(), g.seqs.end());
    for (int64_t b : g.seqs)
      for (int64_t i = 0; i < len; ++i) index.push_back(batch.query_start[b] + i);
    groups.push_back(std::move(g));
  };
  for (int64_t b = 0; b < batch.num_sequences(); ++b) {
    if (batch.length(b) == 1)
      decode.push_back(b);
    else
      add({b}, batch.length(b));
  }
  if (!decode.empty()) add(std::move(decode), 1);
  return groups;
}

template <class T>
at::Tensor host_tensor(const std::vector<T>& values, at::IntArrayRef sizes, at::ScalarType dtype) {
  return at::from_blob(const_cast<T*>(values.data()), sizes, at::TensorOptions().dtype(dtype)).clone();
}

}  // namespace

ForwardBatch ForwardBatch::on_host(const BatchInput& input) {
  const auto B = static_cast<int64_t>(input.tokens.size());
  TORCH_CHECK(static_cast<int64_t>(input.start_positions.size()) == B && static_cast<int64_t>(input.block_tables.size()) == B &&
                  static_cast<int64_t>(input.state_slots.size()) == B,
              "BatchInput: tokens, start_positions, block_tables and state_slots need one entry per sequence (", B, ")");
  ForwardBatch batch;
  batch.query_start.assign(1, 0);
  std::vector<int64_t> tokens, positions;
  size_t max_blocks = 1;
  for (int64_t b = 0; b < B; ++b) {
    const auto& run = input.tokens[b];
    tokens.insert(tokens.end(), run.begin(), run.end());
    for (size_t i = 0; i < run.size(); ++i) positions.push_back(input.start_positions[b] + static_cast<int64_t>(i));
    batch.query_start.push_back(static_cast<int64_t>(tokens.size()));
    max_blocks = std::max(max_blocks, input.block_tables[b].size());
  }
  std::vector<int32_t> table(B * max_blocks, 0);
  for (int64_t b = 0; b < B; ++b) std::copy(input.block_tables[b].begin(), input.block_tables[b].end(), table.begin() + b * max_blocks);
  batch.start_positions = input.start_positions;
  batch.max_blocks = static_cast<int64_t>(max_blocks);
  batch.static_shapes = input.static_shapes;
  const auto T = static_cast<int64_t>(tokens.size());
  batch.token_ids = host_tensor(tokens, {T}, at::kLong);
  batch.positions = host_tensor(positions, {T}, at::kLong);
  batch.block_tables = host_tensor(table, {B, batch.max_blocks}, at::kInt);
  batch.state_slots = host_tensor(input.state_slots, {B}, at::kInt);
  batch.sample_rows = host_tensor(input.sample_rows, {static_cast<int64_t>(input.sample_rows.size())}, at::kLong);
  batch.score_rows = host_tensor(input.score_rows, {static_cast<int64_t>(input.score_rows.size())}, at::kLong);
  if (B > 0) {
    std::vector<int64_t> index;
    batch.groups = group_layout(batch, index);
    batch.group_index = host_tensor(index, {static_cast<int64_t>(index.size())}, at::kLong);
  }
  batch.validate();
  for (int64_t row : input.sample_rows) TORCH_CHECK(row >= 0 && row < T, "ForwardBatch: sample row ", row, " is not in [0, ", T, ")");
  for (int64_t row : input.score_rows) TORCH_CHECK(row >= 0 && row < T, "ForwardBatch: score row ", row, " is not in [0, ", T, ")");
  return batch;
}

std::vector<at::Tensor*> ForwardBatch::device_inputs() {
  return {&token_ids, &positions, &block_tables, &state_slots, &sample_rows, &score_rows, &group_index};
}

ForwardBatch ForwardBatch::build(const BatchInput& input, at::Device device) {
  ForwardBatch batch = on_host(input);
  for (at::Tensor* t : batch.device_inputs()) *t = t->to(device);
  return batch;
}

void ForwardBatch::validate() const {
  const int64_t B = num_sequences();
  TORCH_CHECK(B > 0, "ForwardBatch: no sequences");
  TORCH_CHECK(static_cast<int64_t>(query_start.size()) == B + 1 && query_start[0] == 0, "ForwardBatch: query_start needs B + 1 = ", B + 1,
              " offsets starting at 0");
  const int64_t T = num_tokens();
  TORCH_CHECK(token_ids.dim() == 1 && token_ids.size(0) == T && token_ids.scalar_type() == at::kLong,
              "ForwardBatch: token_ids must be int64 [", T, "]");
  TORCH_CHECK(positions.dim() == 1 && positions.size(0) == T && positions.scalar_type() == at::kLong,
              "ForwardBatch: positions must be int64 [", T, "]");
  TORCH_CHECK(
      block_tables.dim() == 2 && block_tables.size(0) == B && block_tables.size(1) == max_blocks && block_tables.scalar_type() == at::kInt,
      "ForwardBatch: block_tables must be int32 [", B, ", ", max_blocks, "]");
  TORCH_CHECK(state_slots.dim() == 1 && state_slots.size(0) == B && state_slots.scalar_type() == at::kInt,
              "ForwardBatch: state_slots must be int32 [", B, "]");
  TORCH_CHECK(sample_rows.dim() == 1 && sample_rows.scalar_type() == at::kLong, "ForwardBatch: sample_rows must be int64 [S]");
  TORCH_CHECK(!score_rows.defined() || (score_rows.dim() == 1 && score_rows.scalar_type() == at::kLong),
              "ForwardBatch: score_rows must be int64 [P]");
  TORCH_CHECK(group_index.defined() && group_index.dim() == 1 && group_index.scalar_type() == at::kLong && !groups.empty(),
              "ForwardBatch: group_index must be int64 [G] with its group layout");
  for (int64_t b = 0; b < B; ++b) {
    TORCH_CHECK(length(b) > 0, "ForwardBatch: sequence ", b, " has no query tokens");
    TORCH_CHECK(start_positions[b] >= 0, "ForwardBatch: sequence ", b, " starts at negative position ", start_positions[b]);
    TORCH_CHECK(end_position(b) <= max_blocks * kBlockTokens, "ForwardBatch: sequence ", b, " reaches position ", end_position(b) - 1,
                " but its block table covers only ", max_blocks * kBlockTokens, " positions");
  }
}

}  // namespace deepinfer::model
