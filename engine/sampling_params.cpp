#include "engine/sampling_params.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "engine/check.h"

namespace deepinfer::engine {

using detail::concat;

std::string SamplingParams::validation_error() const {
  if (max_tokens < 1) return concat("max_tokens must be >= 1, got ", max_tokens);
  if (!std::isfinite(temperature) || temperature < 0.0f) {
    return concat("temperature must be finite and >= 0, got ", temperature);
  }
  if (!std::isfinite(top_p) || top_p <= 0.0f || top_p > 1.0f) return concat("top_p must be in (0, 1], got ", top_p);
  if (top_k < -1) return concat("top_k must be -1 or 0 (off) or >= 1, got ", top_k);
  if (!std::isfinite(min_p) || min_p < 0.0f || min_p > 1.0f) return concat("min_p must be in [0, 1], got ", min_p);
  for (int32_t id : stop_token_ids) {
    if (id < 0) return concat("stop_token_ids must be >= 0, got ", id);
  }
  if (min_tokens < 0 || min_tokens > max_tokens) {
    return concat("min_tokens must be in [0, max_tokens=", max_tokens, "], got ", min_tokens);
  }
  if (logprobs < -1 || logprobs > kMaxLogprobs) {
    return concat("logprobs must be -1 (none) or in [0, ", kMaxLogprobs, "], got ", logprobs);
  }
  if (prompt_logprobs < -1 || prompt_logprobs > kMaxLogprobs) {
    return concat("prompt_logprobs must be -1 (none) or in [0, ", kMaxLogprobs, "], got ", prompt_logprobs);
  }
  for (const auto& [token, bias] : logit_bias) {
    if (token < 0 || !std::isfinite(bias))
      return concat("logit_bias needs token ids >= 0 and finite biases, got (", token, ", ", bias, ")");
  }
  for (const auto* ids : {&allowed_token_ids, &banned_token_ids}) {
    for (int32_t id : *ids) {
      if (id < 0) return concat(ids == &allowed_token_ids ? "allowed" : "banned", "_token_ids must be >= 0, got ", id);
    }
  }
  return {};
}

void SamplingParams::validate() const {
  std::string error = validation_error();
  if (!error.empty()) throw std::invalid_argument("invalid sampling params: " + error);
}

std::vector<int32_t> SamplingParams::stop_ids(int32_t eos_token_id) const {
  std::vector<int32_t> ids;
  if (!ignore_eos && eos_token_id >= 0) ids.push_back(eos_token_id);
  ids.insert(ids.end(), stop_token_ids.begin(), stop_token_ids.end());
  return ids;
}

bool SamplingParams::is_stop_token(int32_t token_id) const {
  return std::find(stop_token_ids.begin(), stop_token_ids.end(), token_id) != stop_token_ids.end();
}

}  // namespace deepinfer::engine
