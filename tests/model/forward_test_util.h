#pragma once
// Helpers for the forward tests: random sequences, run plans (prefill chunk sizes, then one
// decode token per step), and drivers that push several sequences through a model either
// one-shot or incrementally, collecting the logits of every position.

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "model/deepseek_v4_model.h"
#include "model/forward_batch.h"
#include "model/model_cache.h"

namespace deepinfer::model::testing {

struct SeqPlan {
  std::vector<int64_t> tokens;
  std::vector<int64_t> chunks;  // prefill chunk sizes; the remaining tokens go one per step
  int32_t slot = 0;
  std::vector<int32_t> blocks;  // block table
};

inline std::vector<int64_t> random_tokens(int64_t count, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
  std::vector<int64_t> out(count);
  for (auto& t : out) t = pick(rng);
  return out;
}

// Distinct, shuffled block ids from [1, num_blocks) (block 0 is padding), `per_seq[i]` for sequence i.
inline std::vector<std::vector<int32_t>> shuffled_blocks(const std::vector<int64_t>& per_seq, int64_t num_blocks, uint32_t seed) {
  std::vector<int32_t> ids(num_blocks - 1);
  std::iota(ids.begin(), ids.end(), 1);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
  std::vector<std::vector<int32_t>> out;
  size_t next = 0;
  for (int64_t n : per_seq) {
    out.emplace_back(ids.begin() + next, ids.begin() + next + n);
    next += n;
  }
  return out;
}

// Model options for the tests: arithmetic (arithmetic.h), attention query tile, observer.
inline DeepseekV4Model::Options model_options(const Arithmetic& arithmetic = Arithmetic::official(),
                                              int64_t query_tile = AttentionOptions{}.query_tile, Observer observer = {}) {
  DeepseekV4Model::Options options;
  options.attention.query_tile = query_tile;
  options.arithmetic = &arithmetic;
  options.observer = std::move(observer);
  return options;
}

inline int64_t blocks_for(int64_t tokens) { return (tokens + kBlockTokens - 1) / kBlockTokens; }

// Every sequence as one chunk from position 0 -> per-sequence logits [len, vocab].
inline std::vector<at::Tensor> run_one_shot(const DeepseekV4Model& model, const std::vector<SeqPlan>& plans, ModelCache& cache,
                                            at::Device device = at::kCPU) {
  BatchInput input;
  int64_t rows = 0;
  for (const SeqPlan& plan : plans) {
    input.tokens.push_back(plan.tokens);
    input.start_positions.push_back(0);
    input.block_tables.push_back(plan.blocks);
    input.state_slots.push_back(plan.slot);
    for (size_t i = 0; i < plan.tokens.size(); ++i) input.sample_rows.push_back(rows++);
  }
  const at::Tensor logits = model.forward(ForwardBatch::build(input, device), cache).cpu();
  std::vector<at::Tensor> out;
  int64_t offset = 0;
  for (const SeqPlan& plan : plans) {
    const auto n = static_cast<int64_t>(plan.tokens.size());
    out.push_back(logits.narrow(0, offset, n));
    offset += n;
  }
  return out;
}

// Steps all sequences together: each step takes every unfinished sequence's next prefill chunk
// (or one decode token), so batches mix prefill chunks and decode steps.
inline std::vector<at::Tensor> run_incremental(const DeepseekV4Model& model, const std::vector<SeqPlan>& plans, ModelCache& cache,
                                               int64_t* steps = nullptr, at::Device device = at::kCPU) {
  const int64_t vocab = model.config().vocab_size;
  std::vector<at::Tensor> out;
  std::vector<int64_t> cursor(plans.size(), 0), chunk(plans.size(), 0);
  for (const SeqPlan& plan : plans) out.push_back(at::zeros({static_cast<int64_t>(plan.tokens.size()), vocab}));
  int64_t count = 0;
  for (;;) {
    BatchInput input;
    std::vector<size_t> members;
    int64_t rows = 0;
    for (size_t s = 0; s < plans.size(); ++s) {
      const SeqPlan& plan = plans[s];
      const auto total = static_cast<int64_t>(plan.tokens.size());
      if (cursor[s] >= total) continue;
      int64_t len = chunk[s] < static_cast<int64_t>(plan.chunks.size()) ? plan.chunks[chunk[s]] : 1;
      len = std::min(len, total - cursor[s]);
      input.tokens.emplace_back(plan.tokens.begin() + cursor[s], plan.tokens.begin() + cursor[s] + len);
      input.start_positions.push_back(cursor[s]);
      input.block_tables.push_back(plan.blocks);
      input.state_slots.push_back(plan.slot);
      for (int64_t i = 0; i < len; ++i) input.sample_rows.push_back(rows++);
      members.push_back(s);
    }
    if (members.empty()) break;
    const at::Tensor logits = model.forward(ForwardBatch::build(input, device), cache).cpu();
    int64_t offset = 0;
    for (size_t i = 0; i < members.size(); ++i) {
      const size_t s = members[i];
      const auto len = static_cast<int64_t>(input.tokens[i].size());
      out[s].narrow(0, cursor[s], len).copy_(logits.narrow(0, offset, len));
      offset += len;
      cursor[s] += len;
      ++chunk[s];
    }
    ++count;
  }
  if (steps != nullptr) *steps = count;
  return out;
}

inline double max_abs_diff(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  return worst;
}

}  // namespace deepinfer::model::testing
