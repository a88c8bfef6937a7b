#pragma once
// sample(): one token per row of a [B, V] logits tensor, deterministic and batch-invariant.
// Owns: logit bias and min_tokens suppression, temperature, the per-row filters (top-k, top-p,
// min-p), Gumbel-max choice with noise from (sequence seed, output position, token id), greedy
// rows, and the optional logprobs. A pure function: no state, no global RNG, no host sync.
// Does not own: building the parameters (engine/sampling_batch.h), the noise specification
// (engine/sampler_noise.h), or deciding that a sequence stopped (the scheduler).
//
// Semantics, per row b (s = scaled logits, all float32):
//  1. l = logits[b] + logit_bias[b]; stop ids -> -inf while suppress_stop[b].
//  2. s = l / temperature (temperature 0: greedy, s = l, no noise).
//  3. keep the tokens with s >= min(max(thr_k, thr_p, thr_m), max s), so the top token always:
//     thr_k = the k-th largest s (every token tied with it is kept);
//     thr_p: sort s descending, give each token kept by top-k the integer mass
//       round(exact_exp(s - max s) * 2^F), F = min(40, 52 - ceil(log2 V)), others 0; the
//       nucleus is the sorted positions whose mass before them is < top_p * total mass, and
//       thr_p is the s of its last position (ties with it kept);
//     thr_m = max s + exact_log(min_p) (min_p below FLT_MIN acts as FLT_MIN).
//     A filter that is off (top_k <= 0 or >= V, top_p = 1, min_p = 0) has thr = -inf.
//  4. token = argmax over kept tokens of s + gumbel(mix_seed(seed, position), id), lowest id on
//     ties; -1 when no token is allowed (every l is -inf).
//  5. logprobs are of the raw logits (before bias, suppression, temperature and filters):
//     x - max x - exact_log(sum of the integer masses * 2^-F).
//
// Why the bits cannot depend on the rest of the batch or the device: every elementwise step is
// a correctly rounded IEEE op or an exact integer/bit op (engine/sampler_ops.h), so its result
// does not depend on where the element sits or which vector lane computes it; every reduction is
// order-independent (max, argmax with lowest-id ties, integer sums and prefix sums, comparison
// sorts whose values are unique as a multiset); no reduction mixes rows; the noise depends on
// (seed, position, token id), never on the row index or an RNG's history. So CPU and CUDA give
// identical bits, and so do batch sizes, row orders and recomputation after preemption.

#include <ATen/ATen.h>

#include "engine/sampling_batch.h"

namespace deepinfer::engine {

struct SampleResult {
  at::Tensor tokens;        // [B] int64; -1 when every token of the row is banned
  at::Tensor logprobs;      // [B] float32, chosen token (-inf for -1); undefined if num_logprobs < 0
  at::Tensor top_logprobs;  // [B, N] float32, N = num_logprobs; undefined unless N > 0
  at::Tensor top_ids;       // [B, N] int64, by logprob descending, lowest id first on ties
};

// logits: [B, V] float32, bfloat16 or float16; batch on the logits' device with size B.
SampleResult sample(const at::Tensor& logits, const SamplingBatch& batch);

// The logprobs of `tokens` [B] int64 under raw logits [B, V] (-inf where a token is -1) and the
// top `top_n` (>= 0; top_ids / top_logprobs undefined for 0), with step 5's arithmetic above: the
// same bits on every device. What sample() returns as logprobs, and the prompt logprobs.
struct TokenLogprobs {
  at::Tensor logprobs;      // [B] float32
  at::Tensor top_ids;       // [B, top_n] int64
  at::Tensor top_logprobs;  // [B, top_n] float32
};
TokenLogprobs token_logprobs(const at::Tensor& logits, const at::Tensor& tokens, int64_t top_n);

// [B, V] bool: the finite tokens step 3 keeps, i.e. those a non-greedy row can return for
// some seed (a greedy row returns its largest). For tests and debugging.
at::Tensor candidate_mask(const at::Tensor& logits, const SamplingBatch& batch);

// F above: the bits of the integer probability masses for a vocabulary of this size.
int fixed_point_bits(int64_t vocab_size);

}  // namespace deepinfer::engine
