#include "engine/model_runner.h"

#include <cmath>
#include <limits>

#include <c10/core/Event.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <thread>

#include "engine/check.h"
#include "engine/prompt_logprobs.h"
#include "engine/sampler.h"

namespace deepinfer::engine {
namespace {

// The sampled tokens of one step (and its prompt logprobs, already queued for the host), copied to
// the host asynchronously; wait() blocks on an event recorded right after the copy, not on the
// device work queued behind it.
class ModelStep final : public PendingStep {
 public:
  ModelStep(int64_t step, std::vector<SampledToken> rows, const SampleResult& sampled, at::Device device, PromptScores prompt)
      : step_(step), rows_(std::move(rows)), prompt_(std::move(prompt)) {
    if (device.is_cpu()) {
      tokens_ = sampled.tokens;
      logprobs_ = sampled.logprobs;
      top_ids_ = sampled.top_ids;
      top_logprobs_ = sampled.top_logprobs;
      return;
    }
    auto copy = [](const at::Tensor& t) {
      if (!t.defined()) return t;
      at::Tensor host = at::empty(t.sizes(), t.options().device(at::kCPU).pinned_memory(true));
      host.copy_(t, /*non_blocking=*/true);
      return host;
    };
    tokens_ = copy(sampled.tokens);
    logprobs_ = copy(sampled.logprobs);
    top_ids_ = copy(sampled.top_ids);
    top_logprobs_ = copy(sampled.top_logprobs);
    const auto* guard = c10::impl::getDeviceGuardImpl(device.type());
    event_ = std::make_unique<c10::Event>(device.type());
    event_->record(guard->getStream(device));
  }

  ExecutedStep wait() override {
    if (event_) {
      while (!event_->query()) std::this_thread::yield();
    }
    ExecutedStep executed;
    executed.result.step = step_;
    executed.result.tokens = std::move(rows_);
    const int64_t* tokens = tokens_.data_ptr<int64_t>();
    const bool any_logprobs = logprobs_.defined();
    if (any_logprobs) executed.logprobs.resize(executed.result.tokens.size());
    for (std::size_t i = 0; i < executed.result.tokens.size(); ++i) {
      executed.result.tokens[i].token_id = static_cast<int32_t>(tokens[i]);
      if (!any_logprobs || !wants_logprobs_[i]) continue;
      RowLogprobs row;
      row.logprob = logprobs_[i].item<float>();
      if (top_ids_.defined())
        for (int64_t k = 0; k < top_ids_.size(1); ++k) {
          row.top_ids.push_back(static_cast<int32_t>(top_ids_[i][k].item<int64_t>()));
          row.top_logprobs.push_back(top_logprobs_[i][k].item<float>());
        }
      executed.logprobs[i] = std::move(row);
    }
    executed.prompt_logprobs = prompt_.results();
    return executed;
  }

  std::vector<bool> wants_logprobs_;

 private:
  int64_t step_;
  std::vector<SampledToken> rows_;
  PromptScores prompt_;
  at::Tensor tokens_, logprobs_, top_ids_, top_logprobs_;
  std::unique_ptr<c10::Event> event_;
};

// The row's logit bias: the request's biases, then -inf for its banned tokens and, with an
// allowed list, for every token outside it (SamplingBatch::from_rows sums duplicates).
std::vector<std::pair<int64_t, float>> logit_bias_of(const SamplingParams& p, int64_t vocab_size) {
  std::vector<std::pair<int64_t, float>> bias(p.logit_bias.begin(), p.logit_bias.end());
  const float ban = -std::numeric_limits<float>::infinity();
  for (int32_t id : p.banned_token_ids) bias.emplace_back(id, ban);
  if (!p.allowed_token_ids.empty()) {
    std::vector<bool> allowed(static_cast<std::size_t>(vocab_size), false);
    for (int32_t id : p.allowed_token_ids)
      if (id < vocab_size) allowed[static_cast<std::size_t>(id)] = true;
    for (int64_t id = 0; id < vocab_size; ++id)
      if (!allowed[static_cast<std::size_t>(id)]) bias.emplace_back(id, ban);
  }
  return bias;
}

SamplingRow sampling_row(const ScheduledSeq& row, int32_t eos_token_id, int64_t vocab_size) {
  const SamplingParams& p = *row.params;
  SamplingRow s;
  s.temperature = p.temperature;
  s.top_k = p.top_k;
  s.top_p = p.top_p;
  s.min_p = p.min_p;
  s.seed = p.seed;
  s.position = row.output_index;
  const std::vector<int32_t> stop_ids = p.stop_ids(eos_token_id);
  s.stop_ids.assign(stop_ids.begin(), stop_ids.end());
  s.suppress_stop = !p.may_stop_at(row.output_index) && !s.stop_ids.empty();  // the stop rule: min_tokens
  s.logprobs = p.logprobs;
  s.logit_bias = logit_bias_of(p, vocab_size);
  return s;
}

}  // namespace

ModelRunner::ModelRunner(const model::ModelWeights& weights, model::ExpertCommunicator& comm, Options options)
    : options_(options),
      model_(weights, comm, options.model),
      cache_(weights.config(),
             model::ModelCache::Options{
                 .num_blocks = options.num_blocks, .num_slots = options.num_slots, .dtype = options.dtype, .device = options.device}) {
  if (!options_.debug_logits_path.empty()) {
    debug_logits_.reset(std::fopen(options_.debug_logits_path.c_str(), "w"));
    TORCH_CHECK(debug_logits_ != nullptr, "ModelRunner: cannot open the debug logits file ", options_.debug_logits_path);
  }
}

namespace {

void dump_logits(std::FILE* file, const at::Tensor& logits, const std::vector<SamplingRow>& rows) {
  const at::Tensor host = logits.to(at::kCPU, at::kFloat).contiguous();
  const float* data = host.data_ptr<float>();
  const int64_t vocab = host.size(1);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    std::fprintf(file, "{\"seed\": %llu, \"position\": %lld, \"logits\": [", static_cast<unsigned long long>(rows[r].seed),
                 static_cast<long long>(rows[r].position));
    for (int64_t v = 0; v < vocab; ++v) {
      const double x = data[r * vocab + v];
      if (v) std::fputs(", ", file);
      if (std::isfinite(x))
        std::fprintf(file, "%.9g", x);
      else
        std::fputs("null", file);
    }
    std::fprintf(file, "]}\n");
  }
  std::fflush(file);
}

}  // namespace

void ModelRunner::check_pool_ids(const ScheduledSeq& row, int64_t step) const {
  ENGINE_ASSERT(row.state_slot >= 1 && row.state_slot < options_.num_slots, "step ", step, ": sequence ", row.seq_id, " has state slot ",
                row.state_slot, ", the runner's pool holds slots 1..", options_.num_slots - 1);
  for (const int32_t block : row.block_table) {
    ENGINE_ASSERT(block >= 1 && block < options_.num_blocks, "step ", step, ": sequence ", row.seq_id, " has block ", block,
                  ", the runner's pool holds blocks 1..", options_.num_blocks - 1);
  }
}

std::unique_ptr<PendingStep> ModelRunner::execute(const SchedulerOutput& out) {
  ENGINE_ASSERT(!out.seqs.empty(), "ModelRunner::execute: step ", out.step, " has no sequences");
  model::PartClock* clock = options_.model.clock;
  if (clock != nullptr) clock->enter(model::ForwardPart::kStaging, -1);
  model::BatchInput input;
  std::vector<int64_t> pending_flat_rows, pending_source_rows;
  std::vector<SampledToken> rows;
  std::vector<SamplingRow> sampling;
  PromptScores prompt;
  int64_t flat = 0;
  for (const ScheduledSeq& row : out.seqs) {
    check_pool_ids(row, out.step);
    prompt.add(row, flat);
    std::vector<int64_t> tokens(row.query_token_ids.begin(), row.query_token_ids.end());
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] != kPendingToken) continue;
      auto it = last_rows_.find(row.seq_id);
      ENGINE_ASSERT(last_step_ == out.step - 1 && it != last_rows_.end(), "step ", out.step, ": sequence ", row.seq_id,
                    " has a pending token but step ", out.step - 1, " sampled none for it");
      tokens[i] = 0;  // replaced on the device below
      pending_flat_rows.push_back(flat + static_cast<int64_t>(i));
      pending_source_rows.push_back(it->second);
    }
    flat += static_cast<int64_t>(tokens.size());
    input.tokens.push_back(std::move(tokens));
    input.start_positions.push_back(row.start_pos);
    input.block_tables.push_back(row.block_table);
    input.state_slots.push_back(row.state_slot);
    if (row.sample) {
      input.sample_rows.push_back(flat - 1);
      rows.push_back(SampledToken{.seq_id = row.seq_id, .epoch = row.epoch, .token_id = 0});
      sampling.push_back(sampling_row(row, out.eos_token_id, config().vocab_size));
    }
  }
  input.score_rows = prompt.flat_rows();
  model::ForwardBatch batch = model::ForwardBatch::build(input, options_.device);
  if (!pending_flat_rows.empty()) {
    const auto index_options = at::TensorOptions().dtype(at::kLong);
    const at::Tensor dst = at::tensor(pending_flat_rows, index_options).to(options_.device, /*non_blocking=*/true);
    const at::Tensor src = at::tensor(pending_source_rows, index_options).to(options_.device, /*non_blocking=*/true);
    batch.token_ids.index_copy_(0, dst, last_tokens_.index_select(0, src));
  }
  SampleResult sampled;
  // The forward, with the scored prompt rows' final hidden states where a row asks for them.
  const auto run = [&]() {
    if (prompt.empty()) return model_.forward(batch, cache_);
    model::DeepseekV4Model::Scored scored = model_.forward_scored(batch, cache_);
    prompt.compute(model_, scored.score_hidden, options_.device);
    return scored.logits;
  };
  if (!rows.empty()) {
    const at::Tensor logits = run();  // [S, vocab] float32
    if (debug_logits_) dump_logits(debug_logits_.get(), logits, sampling);
    if (clock != nullptr) clock->enter(model::ForwardPart::kSampler, -1);
    const SamplingBatch params = SamplingBatch::from_rows(sampling, config().vocab_size).to(options_.device, /*non_blocking=*/true);
    sampled = sample(logits, params);
  } else {
    run();  // prefill chunks that sample nothing still write the cache
    sampled.tokens = at::empty({0}, at::TensorOptions().dtype(at::kLong).device(options_.device));
  }
  last_tokens_ = sampled.tokens;
  last_rows_.clear();
  for (std::size_t i = 0; i < rows.size(); ++i) last_rows_[rows[i].seq_id] = static_cast<int64_t>(i);
  last_step_ = out.step;
  auto step = std::make_unique<ModelStep>(out.step, std::move(rows), sampled, options_.device, std::move(prompt));
  for (const SamplingRow& s : sampling) step->wants_logprobs_.push_back(s.logprobs >= 0);
  if (clock != nullptr) clock->end_step(out.kind == StepKind::kDecode);
  return step;
}

void ModelRunner::execute_dummy() {
  model::BatchInput input;
  input.tokens.push_back({0});
  input.start_positions.push_back(0);
  input.block_tables.push_back({0});
  input.state_slots.push_back(0);
  model::PartClock* clock = options_.model.clock;
  if (clock != nullptr) clock->enter(model::ForwardPart::kStaging, -1);
  model_.forward(model::ForwardBatch::build(input, options_.device), cache_);
  if (clock != nullptr) clock->end_step(/*decode=*/false);
}

}  // namespace deepinfer::engine
