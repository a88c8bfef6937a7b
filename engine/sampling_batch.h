#pragma once
// SamplingBatch: the sampling parameters of one step's rows as tensors, plus host-known hints.
// Owns: the per-row, per-step description of sampling (SamplingRow), its argument checks, and
// packing rows into [B] tensors, padded stop-id lists and sparse logit-bias triplets.
// Does not own: request-level parameters and their user-facing validation
// (engine/sampling_params.h), deciding that a sequence stopped (the scheduler, at commit time),
// or sampling itself (engine/sampler.h).
//
// Mapping from a request (done by the model runner): seed = the request's seed or
// derive_request_seed(job_seed, id); position = number of tokens already generated;
// stop_ids = EOS (unless ignore_eos) plus stop_token_ids; suppress_stop = position < min_tokens.

#include <ATen/ATen.h>

#include <cstdint>
#include <limits>
#include <span>
#include <utility>
#include <vector>

namespace deepinfer::engine {

struct SamplingRow {
  float temperature = 1.0f;                           // >= 0, finite; 0 = greedy (argmax, lowest id on ties)
  int32_t top_k = 0;                                  // <= 0 or >= vocab = off; ties at the k-th value are all kept
  float top_p = 1.0f;                                 // (0, 1]; 1 = off
  float min_p = 0.0f;                                 // [0, 1]; 0 = off
  uint64_t seed = 0;                                  // the sequence seed (given or derived); never the batch row
  int64_t position = 0;                               // output position of the token being sampled (0 = first generated)
  bool suppress_stop = false;                         // min_tokens not reached: stop_ids are banned
  std::vector<int64_t> stop_ids;                      // each in [0, vocab)
  std::vector<std::pair<int64_t, float>> logit_bias;  // (token, bias); -inf bans the token
  int32_t logprobs = -1;                              // -1 none; 0 the chosen token's logprob; N also the top N
};

// Facts about the whole batch that the host knows without reading device memory. sample() uses
// them only to skip work that is an exact no-op for every row, so hints that over-state (true,
// or a larger max_top_k) give bit-identical results; the defaults are the safe, slow values.
// Under-stating is a caller bug: from_rows() computes tight, true hints.
struct SamplingHints {
  static constexpr int64_t kUnknownTopK = std::numeric_limits<int64_t>::max();
  bool any_random = true;            // a row has temperature > 0 (else no noise is drawn)
  int64_t max_top_k = kUnknownTopK;  // largest top_k in (0, vocab); 0 = no row uses top-k
  bool any_top_p = true;             // a row has top_p < 1
  bool any_min_p = true;             // a row has min_p > 0
  bool any_suppress_stop = true;     // a row has suppress_stop with a non-empty stop_ids
};

struct SamplingBatch {
  at::Tensor temperature;    // [B] float32
  at::Tensor top_k;          // [B] int64
  at::Tensor top_p;          // [B] float32
  at::Tensor min_p;          // [B] float32
  at::Tensor seed;           // [B] int64, the uint64 seed bit-cast
  at::Tensor position;       // [B] int64
  at::Tensor suppress_stop;  // [B] bool
  at::Tensor stop_ids;       // [B, S] int64, padded with -1 (S may be 0)
  at::Tensor bias_rows;      // [N] int64 \ sparse logit bias: (row, token) pairs are unique,
  at::Tensor bias_tokens;    // [N] int64  > sorted by row then token; duplicates of one row's
  at::Tensor bias_values;    // [N] float32/ token are summed in from_rows
  SamplingHints hints;
  int32_t num_logprobs = -1;  // max over rows of SamplingRow::logprobs

  // CPU tensors for these rows. Throws (TORCH_CHECK, naming the row and value) on a bad field.
  static SamplingBatch from_rows(std::span<const SamplingRow> rows, int64_t vocab_size);

  // Every tensor moved to device; hints and num_logprobs copied.
  SamplingBatch to(at::Device device, bool non_blocking = false) const;
  // Its tensors, for model::StepStaging::upload (one copy with the step's other inputs).
  std::vector<at::Tensor*> tensors();

  int64_t size() const { return temperature.defined() ? temperature.size(0) : 0; }
};

}  // namespace deepinfer::engine
