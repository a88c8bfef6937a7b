#include "model/forward_batch.h"

#include <algorithm>

#include "model/model_config.h"

namespace deepinfer::model {

ForwardBatch ForwardBatch::build(const BatchInput& input, at::Device device) {
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
  const auto i64 = at::TensorOptions().dtype(at::kLong);
  const auto i32 = at::TensorOptions().dtype(at::kInt);
  const auto T = static_cast<int64_t>(tokens.size());
  batch.token_ids = at::from_blob(tokens.data(), {T}, i64).clone().to(device);
  batch.positions = at::from_blob(positions.data(), {T}, i64).clone().to(device);
  batch.block_tables = at::from_blob(table.data(), {B, batch.max_blocks}, i32).clone().to(device);
  batch.state_slots = at::from_blob(const_cast<int32_t*>(input.state_slots.data()), {B}, i32).clone().to(device);
  batch.sample_rows = at::from_blob(const_cast<int64_t*>(input.sample_rows.data()), {static_cast<int64_t>(input.sample_rows.size())}, i64)
                          .clone()
                          .to(device);
  batch.score_rows =
      at::from_blob(const_cast<int64_t*>(input.score_rows.data()), {static_cast<int64_t>(input.score_rows.size())}, i64).clone().to(device);
  batch.validate();
  for (int64_t row : input.sample_rows) TORCH_CHECK(row >= 0 && row < T, "ForwardBatch: sample row ", row, " is not in [0, ", T, ")");
  for (int64_t row : input.score_rows) TORCH_CHECK(row >= 0 && row < T, "ForwardBatch: score row ", row, " is not in [0, ", T, ")");
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
  for (int64_t b = 0; b < B; ++b) {
    TORCH_CHECK(length(b) > 0, "ForwardBatch: sequence ", b, " has no query tokens");
    TORCH_CHECK(start_positions[b] >= 0, "ForwardBatch: sequence ", b, " starts at negative position ", start_positions[b]);
    TORCH_CHECK(end_position(b) <= max_blocks * kBlockTokens, "ForwardBatch: sequence ", b, " reaches position ", end_position(b) - 1,
                " but its block table covers only ", max_blocks * kBlockTokens, " positions");
  }
}

}  // namespace deepinfer::model
