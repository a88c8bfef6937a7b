#include "engine/sampling_batch.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

namespace deepinfer::engine {
namespace {

void check_row(const SamplingRow& r, size_t i, int64_t vocab_size) {
  TORCH_CHECK(std::isfinite(r.temperature) && r.temperature >= 0.0f, "sampling row ", i, ": temperature must be finite and >= 0, got ",
              r.temperature);
  TORCH_CHECK(std::isfinite(r.top_p) && r.top_p > 0.0f && r.top_p <= 1.0f, "sampling row ", i, ": top_p must be in (0, 1], got ", r.top_p);
  TORCH_CHECK(std::isfinite(r.min_p) && r.min_p >= 0.0f && r.min_p <= 1.0f, "sampling row ", i, ": min_p must be in [0, 1], got ", r.min_p);
  TORCH_CHECK(r.position >= 0, "sampling row ", i, ": position must be >= 0, got ", r.position);
  for (int64_t id : r.stop_ids) {
    TORCH_CHECK(id >= 0 && id < vocab_size, "sampling row ", i, ": stop id ", id, " is outside the vocabulary [0, ", vocab_size, ")");
  }
  for (const auto& [token, bias] : r.logit_bias) {
    TORCH_CHECK(token >= 0 && token < vocab_size, "sampling row ", i, ": logit_bias token ", token, " is outside the vocabulary [0, ",
                vocab_size, ")");
    TORCH_CHECK(!std::isnan(bias) && bias != std::numeric_limits<float>::infinity(), "sampling row ", i, ": logit_bias for token ", token,
                " must be finite or -inf, got ", bias);
  }
  TORCH_CHECK(r.logprobs >= -1 && r.logprobs <= vocab_size, "sampling row ", i, ": logprobs must be in [-1, vocab_size=", vocab_size,
              "], got ", r.logprobs);
}

}  // namespace

SamplingBatch SamplingBatch::from_rows(std::span<const SamplingRow> rows, int64_t vocab_size) {
  TORCH_CHECK(vocab_size > 0, "vocab_size must be > 0, got ", vocab_size);
  const int64_t b = static_cast<int64_t>(rows.size());
  size_t max_stop = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    check_row(rows[i], i, vocab_size);
    max_stop = std::max(max_stop, rows[i].stop_ids.size());
  }
  const int64_t s = static_cast<int64_t>(max_stop);

  SamplingBatch batch;
  batch.temperature = at::empty({b}, at::kFloat);
  batch.top_k = at::empty({b}, at::kLong);
  batch.top_p = at::empty({b}, at::kFloat);
  batch.min_p = at::empty({b}, at::kFloat);
  batch.seed = at::empty({b}, at::kLong);
  batch.position = at::empty({b}, at::kLong);
  batch.suppress_stop = at::empty({b}, at::kBool);
  batch.stop_ids = at::full({b, s}, -1, at::kLong);
  SamplingHints hints{.any_random = false, .max_top_k = 0, .any_top_p = false, .any_min_p = false, .any_suppress_stop = false};

  float* temperature = batch.temperature.data_ptr<float>();
  int64_t* top_k = batch.top_k.data_ptr<int64_t>();
  float* top_p = batch.top_p.data_ptr<float>();
  float* min_p = batch.min_p.data_ptr<float>();
  int64_t* seed = batch.seed.data_ptr<int64_t>();
  int64_t* position = batch.position.data_ptr<int64_t>();
  bool* suppress = batch.suppress_stop.data_ptr<bool>();
  int64_t* stop_ids = batch.stop_ids.data_ptr<int64_t>();
  std::vector<int64_t> bias_rows, bias_tokens;
  std::vector<float> bias_values;
  for (int64_t i = 0; i < b; ++i) {
    const SamplingRow& r = rows[static_cast<size_t>(i)];
    temperature[i] = r.temperature;
    top_k[i] = r.top_k;
    top_p[i] = r.top_p;
    min_p[i] = r.min_p;
    std::memcpy(&seed[i], &r.seed, sizeof(int64_t));
    position[i] = r.position;
    suppress[i] = r.suppress_stop;
    std::copy(r.stop_ids.begin(), r.stop_ids.end(), stop_ids + i * s);
    // Duplicates of one token are summed in the order given; the map sorts by token.
    std::map<int64_t, float> bias;
    for (const auto& [token, value] : r.logit_bias) bias[token] += value;
    for (const auto& [token, value] : bias) {
      bias_rows.push_back(i);
      bias_tokens.push_back(token);
      bias_values.push_back(value);
    }
    hints.any_random |= r.temperature > 0.0f;
    if (r.top_k > 0 && r.top_k < vocab_size) hints.max_top_k = std::max<int64_t>(hints.max_top_k, r.top_k);
    hints.any_top_p |= r.top_p < 1.0f;
    hints.any_min_p |= r.min_p > 0.0f;
    hints.any_suppress_stop |= r.suppress_stop && !r.stop_ids.empty();
    batch.num_logprobs = std::max(batch.num_logprobs, r.logprobs);
  }
  const auto n = static_cast<int64_t>(bias_rows.size());
  batch.bias_rows = at::empty({n}, at::kLong);
  batch.bias_tokens = at::empty({n}, at::kLong);
  batch.bias_values = at::empty({n}, at::kFloat);
  std::copy(bias_rows.begin(), bias_rows.end(), batch.bias_rows.data_ptr<int64_t>());
  std::copy(bias_tokens.begin(), bias_tokens.end(), batch.bias_tokens.data_ptr<int64_t>());
  std::copy(bias_values.begin(), bias_values.end(), batch.bias_values.data_ptr<float>());
  batch.hints = hints;
  return batch;
}

std::vector<at::Tensor*> SamplingBatch::tensors() {
  return {&temperature, &top_k, &top_p, &min_p, &seed, &position, &suppress_stop, &stop_ids, &bias_rows, &bias_tokens, &bias_values};
}

SamplingBatch SamplingBatch::to(at::Device device, bool non_blocking) const {
  SamplingBatch out = *this;
  for (at::Tensor* t : out.tensors()) {
    TORCH_CHECK(t->defined(), "SamplingBatch::to: a tensor is undefined; build with from_rows");
    *t = t->to(device, non_blocking);
  }
  return out;
}

}  // namespace deepinfer::engine
