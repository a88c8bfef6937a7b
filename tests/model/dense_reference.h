#pragma once
// An independent, deliberately plain DeepSeek-V4 forward for tests: one sequence, all tokens at
// once (positions 0..T-1), full attention masks built from the spec's formulas
// (deepseek-v4.md §2.2-2.8). It shares no layer code with model/ (only the weights), and uses
// complex multiplication for RoPE, explicit per-window loops for the compressors, and a dense
// all-experts pass for the MoE, so a bug in the paged forward does not hide in both.

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "model/weights.h"

namespace deepinfer::model::testing {

// -> [T, vocab] float32 logits for every position.
at::Tensor dense_reference_logits(const ModelWeights& weights, const std::vector<int64_t>& tokens);

}  // namespace deepinfer::model::testing
