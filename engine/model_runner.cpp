#include "engine/model_runner.h"

#include <cmath>
#include <limits>

#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <optional>
#include <thread>

#include "engine/check.h"
#include "engine/cuda/kernels.h"
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
                 .num_blocks = options.num_blocks, .num_slots = options.num_slots, .dtype = options.dtype, .device = options.device}),
      staging_(options.device),
      graphs_(options.device, options.cuda_graphs),
      comm_world_(comm.world_size()) {
  if (options_.device.is_cuda()) stream_ = cuda::own_stream(options_.device);
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

// The host side of one step: the forward's input, the previous step's row of each pending
// decode token, the sampled rows and their sampling parameters, the scored prompt rows.
struct ModelRunner::StepPlan {
  model::BatchInput input;
  std::vector<int64_t> sources;  // [T]: row of the previous step's samples to take the token from, -1: the token given
  std::vector<SampledToken> rows;
  std::vector<SamplingRow> sampling;  // rows.size() real rows, then the padding rows' (decode buckets)
  PromptScores prompt;
  bool padded = false;  // a decode step padded to its bucket (decode_graphs.h)
};

ModelRunner::StepPlan ModelRunner::plan(const SchedulerOutput& out) const {
  StepPlan plan;
  int64_t flat = 0;
  for (const ScheduledSeq& row : out.seqs) {
    check_pool_ids(row, out.step);
    plan.prompt.add(row, flat);
    std::vector<int64_t> tokens(row.query_token_ids.begin(), row.query_token_ids.end());
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      int64_t source = -1;
      if (tokens[i] == kPendingToken) {
        auto it = last_rows_.find(row.seq_id);
        ENGINE_ASSERT(last_step_ == out.step - 1 && it != last_rows_.end(), "step ", out.step, ": sequence ", row.seq_id,
                      " has a pending token but step ", out.step - 1, " sampled none for it");
        tokens[i] = 0;  // replaced on the device
        source = it->second;
      }
      plan.sources.push_back(source);
    }
    flat += static_cast<int64_t>(tokens.size());
    plan.input.tokens.push_back(std::move(tokens));
    plan.input.start_positions.push_back(row.start_pos);
    plan.input.block_tables.push_back(row.block_table);
    plan.input.state_slots.push_back(row.state_slot);
    if (row.sample) {
      plan.input.sample_rows.push_back(flat - 1);
      plan.rows.push_back(SampledToken{.seq_id = row.seq_id, .epoch = row.epoch, .token_id = 0});
      plan.sampling.push_back(sampling_row(row, out.eos_token_id, config().vocab_size));
    }
  }
  plan.input.score_rows = plan.prompt.flat_rows();
  return plan;
}

// A decode step on CUDA: rows up to decode_bucket(B), block tables widened to block_bucket(); the
// padding rows read and write only block 0 and slot 0 and sample greedily (dropped).
void ModelRunner::pad_decode(StepPlan& plan) const {
  model::BatchInput& in = plan.input;
  const auto B = static_cast<int64_t>(in.tokens.size());
  std::size_t widest_now = 1;
  for (const auto& table : in.block_tables) widest_now = std::max(widest_now, table.size());
  const int64_t widest = options_.max_blocks_per_seq > 0 ? options_.max_blocks_per_seq : options_.num_blocks;
  const auto blocks = static_cast<std::size_t>(block_bucket(static_cast<int64_t>(widest_now), widest));
  for (auto& table : in.block_tables) table.resize(blocks, 0);
  SamplingRow padding;
  padding.temperature = 0.0f;
  for (int64_t b = B; b < decode_bucket(B); ++b) {
    in.tokens.push_back({0});
    in.start_positions.push_back(0);
    in.block_tables.emplace_back(blocks, 0);
    in.state_slots.push_back(0);
    in.sample_rows.push_back(b);
    plan.sources.push_back(-1);
    plan.sampling.push_back(padding);
  }
  in.static_shapes = true;
  plan.padded = true;
}

namespace {

// The outputs of the first n rows (the real ones of a padded step).
SampleResult first_rows(const SampleResult& all, int64_t n) {
  SampleResult out;
  for (auto [from, to] : {std::pair{&all.tokens, &out.tokens},
                          {&all.logprobs, &out.logprobs},
                          {&all.top_ids, &out.top_ids},
                          {&all.top_logprobs, &out.top_logprobs}})
    if (from->defined()) *to = from->narrow(0, 0, n);
  return out;
}

// What changes the work a padded decode step queues besides its bucket (decode_graphs.h).
std::string graph_key(const model::ForwardBatch& batch, const SamplingBatch& params) {
  const SamplingHints& h = params.hints;
  return std::to_string(batch.num_sequences()) + "x" + std::to_string(batch.max_blocks) + " r" + std::to_string(h.any_random) + " k" +
         std::to_string(h.max_top_k) + " p" + std::to_string(h.any_top_p) + " m" + std::to_string(h.any_min_p) + " s" +
         std::to_string(h.any_suppress_stop) + " S" + std::to_string(params.stop_ids.size(1)) + " N" +
         std::to_string(params.bias_rows.size(0)) + " L" + std::to_string(params.num_logprobs);
}

}  // namespace

// The step's device work: the pending tokens from the previous step's samples, the forward, the
// sampler, and the samples kept for the next step. Queues only (no host read of the device).
SampleResult ModelRunner::run_step(model::ForwardBatch& batch, const at::Tensor& sources, const SamplingBatch* params, PromptScores& prompt,
                                   const std::vector<SamplingRow>& sampling) {
  batch.token_ids = at::where(sources.ge(0), last_tokens_.index_select(0, sources.clamp_min(0)), batch.token_ids);
  const auto forward = [&]() {
    if (prompt.empty()) return model_.forward(batch, cache_);
    model::DeepseekV4Model::Scored scored = model_.forward_scored(batch, cache_);
    prompt.compute(model_, scored.score_hidden, options_.device);
    return scored.logits;
  };
  SampleResult sampled;
  if (params == nullptr) {
    forward();  // prefill chunks that sample nothing still write the cache
    sampled.tokens = at::empty({0}, at::TensorOptions().dtype(at::kLong).device(options_.device));
    return sampled;
  }
  const at::Tensor logits = forward();  // [S, vocab] float32
  if (debug_logits_) dump_logits(debug_logits_.get(), logits, sampling);
  if (options_.model.clock != nullptr) options_.model.clock->enter(model::ForwardPart::kSampler, -1);
  sampled = sample(logits, *params);
  // A row without a candidate (-1: only NaN or -inf logits; admission refuses requests whose bans
  // leave none) goes on as token 0, so that the next step's embedding never reads out of range
  // (a device-side assert on CUDA); process() then reports the -1 as an internal error.
  at::Tensor kept = last_tokens_.narrow(0, 0, sampled.tokens.size(0));
  at::clamp_min_out(kept, sampled.tokens, 0);
  return sampled;
}

std::unique_ptr<PendingStep> ModelRunner::execute(const SchedulerOutput& out) {
  ENGINE_ASSERT(!out.seqs.empty(), "ModelRunner::execute: step ", out.step, " has no sequences");
  std::optional<c10::StreamGuard> on_stream;
  if (stream_) on_stream.emplace(*stream_);
  model::PartClock* clock = options_.model.clock;
  if (clock != nullptr) clock->enter(model::ForwardPart::kStaging, -1);
  StepPlan plan = this->plan(out);
  const bool pads = options_.device.is_cuda() || options_.pad_decode_on_cpu;
  if (pads && out.kind == StepKind::kDecode && plan.prompt.empty()) pad_decode(plan);
  // Host tensors, then one copy to the device.
  model::ForwardBatch batch = model::ForwardBatch::on_host(plan.input);
  at::Tensor sources = at::tensor(plan.sources, at::TensorOptions().dtype(at::kLong));
  std::vector<at::Tensor*> inputs = batch.device_inputs();
  inputs.push_back(&sources);
  std::optional<SamplingBatch> params;
  if (!plan.sampling.empty()) {
    params = SamplingBatch::from_rows(plan.sampling, config().vocab_size);
    for (at::Tensor* t : params->tensors()) inputs.push_back(t);
  }
  staging_.upload(inputs);
  // Every sampled row holds a slot of its own, so a step samples fewer rows than the bucket of
  // num_slots: the buffer never moves under a captured graph.
  if (!last_tokens_.defined())
    last_tokens_ = at::zeros({decode_bucket(options_.num_slots)}, at::TensorOptions().dtype(at::kLong).device(options_.device));
  ENGINE_ASSERT(static_cast<int64_t>(plan.sampling.size()) <= last_tokens_.size(0), "step ", out.step, " samples ", plan.sampling.size(),
                " rows, more than the ", last_tokens_.size(0), " the runner keeps");
  const auto step = [&]() { return run_step(batch, sources, params ? &*params : nullptr, plan.prompt, plan.sampling); };
  const bool graphed = plan.padded && clock == nullptr && !debug_logits_ && comm_world_ == 1;
  SampleResult sampled = graphed ? graphs_.run(graph_key(batch, *params), staging_.device_base(), staging_.generation(), step) : step();
  const std::size_t real_rows = plan.rows.size();
  if (plan.padded) sampled = first_rows(sampled, static_cast<int64_t>(real_rows));
  last_rows_.clear();
  for (std::size_t i = 0; i < real_rows; ++i) last_rows_[plan.rows[i].seq_id] = static_cast<int64_t>(i);
  last_step_ = out.step;
  auto pending = std::make_unique<ModelStep>(out.step, std::move(plan.rows), sampled, options_.device, std::move(plan.prompt));
  for (std::size_t i = 0; i < real_rows; ++i) pending->wants_logprobs_.push_back(plan.sampling[i].logprobs >= 0);
  if (clock != nullptr) clock->end_step(out.kind == StepKind::kDecode);
  return pending;
}

void ModelRunner::execute_dummy() {
  std::optional<c10::StreamGuard> on_stream;
  if (stream_) on_stream.emplace(*stream_);
  model::BatchInput input;
  input.tokens.push_back({0});
  input.start_positions.push_back(0);
  input.block_tables.push_back({0});
  input.state_slots.push_back(0);
  model::PartClock* clock = options_.model.clock;
  if (clock != nullptr) clock->enter(model::ForwardPart::kStaging, -1);
  model::ForwardBatch batch = model::ForwardBatch::on_host(input);
  staging_.upload(batch.device_inputs());
  model_.forward(batch, cache_);
  if (clock != nullptr) clock->end_step(/*decode=*/false);
}

}  // namespace deepinfer::engine
