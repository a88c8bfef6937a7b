#include "engine/prompt_logprobs.h"

#include <algorithm>

#include "engine/check.h"
#include "engine/sampler.h"

namespace deepinfer::engine {

void PromptScores::add(const ScheduledSeq& row, int64_t flat_first) {
  if (row.prompt_scored <= 0) return;
  ENGINE_ASSERT(row.prompt_scored <= row.num_query_tokens && row.params != nullptr && row.params->prompt_logprobs >= 0, "sequence ",
                row.seq_id, " scores ", row.prompt_scored, " of its ", row.num_query_tokens, " prefill rows without asking");
  for (int32_t i = 0; i < row.prompt_scored; ++i) {
    const bool last = i + 1 == row.num_query_tokens;
    ENGINE_ASSERT(!last || row.next_prompt_token >= 0, "sequence ", row.seq_id,
                  " scores its chunk's last row without the next prompt token");
    flat_rows_.push_back(flat_first + i);
    targets_.push_back(last ? row.next_prompt_token : row.query_token_ids[static_cast<std::size_t>(i) + 1]);
  }
  rows_.push_back({row.seq_id, row.epoch, row.start_pos + 1, row.prompt_scored, row.params->prompt_logprobs});
  top_n_ = std::max<int64_t>(top_n_, row.params->prompt_logprobs);
}

void PromptScores::compute(const model::DeepseekV4Model& model, const at::Tensor& hidden, at::Device device) {
  const auto P = static_cast<int64_t>(targets_.size());
  ENGINE_ASSERT(hidden.dim() == 2 && hidden.size(0) == P, "PromptScores: ", P, " scored rows but hidden ", hidden.sizes());
  // From pinned memory, asynchronously: a pageable copy would wait for the forward queued before it.
  const at::Tensor host_targets = at::tensor(targets_, at::TensorOptions().dtype(at::kLong));
  const at::Tensor targets = device.is_cpu() ? host_targets : host_targets.pin_memory().to(device, /*non_blocking=*/true);
  std::vector<at::Tensor> logprobs, top_ids, top_logprobs;
  for (int64_t first = 0; first < P; first += kSliceRows) {
    const int64_t n = std::min(kSliceRows, P - first);
    TokenLogprobs lp = token_logprobs(model.head(hidden.narrow(0, first, n)), targets.narrow(0, first, n), top_n_);
    logprobs.push_back(lp.logprobs);
    if (top_n_ > 0) {
      top_ids.push_back(lp.top_ids);
      top_logprobs.push_back(lp.top_logprobs);
    }
  }
  const auto to_host = [&](const std::vector<at::Tensor>& parts) {
    if (parts.empty()) return at::Tensor();
    const at::Tensor all = at::cat(parts, 0);
    if (device.is_cpu()) return all;
    at::Tensor host = at::empty(all.sizes(), all.options().device(at::kCPU).pinned_memory(true));
    host.copy_(all, /*non_blocking=*/true);
    return host;
  };
  logprobs_ = to_host(logprobs);
  top_ids_ = to_host(top_ids);
  top_logprobs_ = to_host(top_logprobs);
}

std::vector<PromptLogprobs> PromptScores::results() const {
  std::vector<PromptLogprobs> out;
  if (rows_.empty()) return out;
  const float* lp = logprobs_.data_ptr<float>();
  const int64_t* ids = top_ids_.defined() ? top_ids_.data_ptr<int64_t>() : nullptr;
  const float* top = top_logprobs_.defined() ? top_logprobs_.data_ptr<float>() : nullptr;
  int64_t r = 0;
  for (const Row& row : rows_) {
    PromptLogprobs entry{.seq_id = row.seq_id, .epoch = row.epoch, .first_position = row.first_position, .rows = {}};
    for (int32_t i = 0; i < row.count; ++i, ++r) {
      RowLogprobs scored;
      scored.logprob = lp[r];
      for (int32_t k = 0; k < row.top_n; ++k) {
        scored.top_ids.push_back(static_cast<int32_t>(ids[r * top_n_ + k]));
        scored.top_logprobs.push_back(top[r * top_n_ + k]);
      }
      entry.rows.push_back(std::move(scored));
    }
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace deepinfer::engine
