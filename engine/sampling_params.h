#pragma once
// SamplingParams: the per-request knobs of generation, validated in one place.
// Owns: the field set, defaults, the validity rules (with messages naming the value) and the
// stop rule below. Does not own: applying them to logits (the sampler) or the stop decision at
// commit time (the Scheduler reads ignore_eos, stop_token_ids, min_tokens and max_tokens).
//
// The stop rule has one definition, here, for the three places that apply it: the Scheduler
// finishes a sequence on a stop id at commit time, the ModelRunner bans the stop ids in sampling
// while they may not stop it yet, and the job (pipeline/) ignores stop strings completed then.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace deepinfer::engine {

struct SamplingParams {
  static constexpr int32_t kMaxLogprobs = 20;

  int32_t max_tokens = 16;              // >= 1: generated tokens, stop token included
  float temperature = 1.0f;             // >= 0, finite; 0 = greedy
  float top_p = 1.0f;                   // (0, 1]
  int32_t top_k = 0;                    // 0 or -1 = off, else >= 1
  float min_p = 0.0f;                   // [0, 1]
  uint64_t seed = 0;                    // sampling noise = f(seed, output position)
  std::vector<int32_t> stop_token_ids;  // each >= 0; end with finish reason stop
  bool ignore_eos = false;              // EOS is then an ordinary token
  int32_t min_tokens = 0;               // [0, max_tokens]: no EOS/stop finish before this many outputs
  int32_t logprobs = -1;                // -1 = none, 0 = chosen token only, N <= kMaxLogprobs = top N too
  // The same for the prompt: the logprob of each prompt token after the first given the ones
  // before it, and the top N there (-1 = none).
  int32_t prompt_logprobs = -1;
  // Added to the logits before sampling (logprobs stay of the raw logits): (token, finite bias),
  // unique tokens. banned_token_ids are never sampled; a non-empty allowed_token_ids bans every
  // other token (the model runner expands it per row and step: O(vocab), for small vocabularies
  // or few such requests).
  std::vector<std::pair<int32_t, float>> logit_bias;
  std::vector<int32_t> allowed_token_ids;
  std::vector<int32_t> banned_token_ids;

  // "" when valid, else one sentence naming the first bad field and its value.
  std::string validation_error() const;
  // Throws std::invalid_argument with validation_error().
  void validate() const;
  bool is_stop_token(int32_t token_id) const;  // one of stop_token_ids

  // Whether the output token at `output_index` (0-based) may end the request through a stop id
  // or a stop string: min_tokens outputs precede it.
  bool may_stop_at(int64_t output_index) const { return output_index >= min_tokens; }
  // The ids that end the request: EOS (unless ignore_eos, or eos_token_id is -1 = none), then
  // stop_token_ids. eos_token_id is the Scheduler's (Scheduler::Options::eos_token_id).
  std::vector<int32_t> stop_ids(int32_t eos_token_id) const;
};

}  // namespace deepinfer::engine
