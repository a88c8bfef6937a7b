#include "pipeline/admission.h"

#include <algorithm>

#include "engine/sampler_noise.h"
#include "pipeline/record_builder.h"

namespace deepinfer::pipeline {
namespace {

engine::SamplingParams to_sampling_params(const io::RequestLine& request, uint64_t seed) {
  engine::SamplingParams params;
  params.max_tokens = static_cast<int32_t>(request.max_tokens);
  params.temperature = static_cast<float>(request.temperature);
  params.top_p = static_cast<float>(request.top_p);
  params.top_k = static_cast<int32_t>(request.top_k);
  params.min_p = static_cast<float>(request.min_p);
  params.seed = seed;
  params.stop_token_ids = request.stop_token_ids;
  params.ignore_eos = request.ignore_eos;
  params.min_tokens = static_cast<int32_t>(request.min_tokens);
  params.logprobs = request.logprobs ? static_cast<int32_t>(*request.logprobs) : -1;
  params.prompt_logprobs = request.prompt_logprobs ? static_cast<int32_t>(*request.prompt_logprobs) : -1;
  params.logit_bias = request.logit_bias;
  params.allowed_token_ids = request.allowed_token_ids;
  params.banned_token_ids = request.banned_token_ids;
  return params;
}

// Why a request cannot run to its max_tokens within the longest sequence the scheduler holds
// (empty if it can). Such a request becomes an error record before it takes any resources.
std::string length_error(const io::RequestLine& request, const engine::Scheduler& scheduler) {
  const int64_t prompt = static_cast<int64_t>(request.prompt_token_ids.size());
  const int64_t limit = scheduler.max_len();
  if (prompt + request.max_tokens <= limit) return "";
  const std::string where = request.input.file + ":" + std::to_string(request.input.line) + ": ";
  const std::string bound = limit == scheduler.options().max_model_len ? "max-model-len " + std::to_string(limit)
                                                                       : "the KV pool's " + std::to_string(limit) + " tokens";
  if (prompt >= limit) return where + "prompt of " + std::to_string(prompt) + " tokens leaves no room for output within " + bound;
  return where + "prompt of " + std::to_string(prompt) + " tokens + max_tokens " + std::to_string(request.max_tokens) + " = " +
         std::to_string(prompt + request.max_tokens) + " exceeds " + bound + "; lower max_tokens to at most " +
         std::to_string(limit - prompt);
}

// Why no token could ever be sampled for the request at some output position (empty if one
// can): its bans leave no token of the vocabulary (or of its allowed list), or, while
// min_tokens holds the stop tokens back, no token but those. The sampler would find no
// candidate; such a request becomes an error record instead.
std::string ban_error(const io::RequestLine& request, int32_t eos_token_id, int64_t vocab_size) {
  std::vector<int32_t> banned = request.banned_token_ids;
  std::vector<int32_t> stops = request.stop_token_ids;
  if (!request.ignore_eos && eos_token_id >= 0) stops.push_back(eos_token_id);
  const auto where = request.input.file + ":" + std::to_string(request.input.line) + ": ";
  const auto left = [&](const std::vector<int32_t>& out) {  // a token outside `out` that may be sampled
    std::vector<int32_t> sorted = out;
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    const auto is_out = [&](int32_t id) { return std::binary_search(sorted.begin(), sorted.end(), id); };
    if (!request.allowed_token_ids.empty())
      return std::any_of(request.allowed_token_ids.begin(), request.allowed_token_ids.end(), [&](int32_t id) { return !is_out(id); });
    if (vocab_size <= 0) return true;  // unknown vocabulary: not checked
    const auto inside = std::count_if(sorted.begin(), sorted.end(), [&](int32_t id) { return id >= 0 && id < vocab_size; });
    return inside < vocab_size;
  };
  const std::string pool = request.allowed_token_ids.empty() ? "token of the vocabulary" : "id in 'allowed_token_ids'";
  if (!left(banned)) return where + "every " + pool + " is banned: no token could be sampled";
  banned.insert(banned.end(), stops.begin(), stops.end());
  if (request.min_tokens > 0 && !left(banned))
    return where + "min_tokens = " + std::to_string(request.min_tokens) +
           " holds the stop tokens (eos, stop_token_ids) back, and every other " + pool + " is banned: no token could be sampled";
  return "";
}

io::RequestReader::Options reader_options(const io::RequestParseOptions& parse) {
  io::RequestReader::Options options;  // the reader's defaults otherwise
  options.parse = parse;
  return options;
}

}  // namespace

Admission::Admission(Options options, WriteRecord write)
    : options_(std::move(options)),
      write_(std::move(write)),
      reader_(options_.inputs, reader_options(options_.parse)),
      owner_(options_.world_size) {}

// The next item of this rank's input, skipping what a resumed run already wrote.
bool Admission::next_owned(io::RequestItem* item, int64_t* index) {
  while (reader_.next(item)) {
    if (owner_.next(sharding_tokens(*item)) != options_.rank) continue;
    *index = next_index_++;
    if (*index >= options_.skip && !options_.finished_ahead.count(*index)) return true;
  }
  input_done_ = true;
  return false;
}

void Admission::admit(engine::Scheduler& scheduler, LiveRequests& live) {
  io::RequestItem item;
  int64_t index = 0;
  while (!input_done_ && scheduler.waiting().size() < options_.window && next_owned(&item, &index)) {
    if (const auto* error = std::get_if<io::RequestError>(&item)) {
      write_(index, error_record(*error));
      continue;
    }
    auto& request = std::get<io::RequestLine>(item);
    if (const std::string error = length_error(request, scheduler); !error.empty()) {
      write_(index, rejected_record(request, error));
      continue;
    }
    if (const std::string error = ban_error(request, scheduler.options().eos_token_id, options_.parse.vocab_size); !error.empty()) {
      write_(index, rejected_record(request, error));
      continue;
    }
    add(scheduler, live, request, index);
  }
}

void Admission::add(engine::Scheduler& scheduler, LiveRequests& live, io::RequestLine& request, int64_t index) {
  const uint64_t seed = request.seed ? *request.seed : engine::derive_request_seed(options_.job_seed, request.id);
  std::optional<PromptLogprobsField> prompt;
  if (request.prompt_logprobs) prompt.emplace(PromptLogprobsField{request.prompt_token_ids, {}});
  const engine::SeqId id = scheduler.add_request(request.id, std::move(request.prompt_token_ids), to_sampling_params(request, seed));
  LiveRequest& added = live.emplace(id, LiveRequest{index, request.input, request.api, seed, Clock::now(), std::nullopt, std::nullopt,
                                                    std::nullopt, std::nullopt})
                           .first->second;
  if (request.logprobs) added.logprobs.emplace();
  if (prompt) {
    prompt->rows.resize(prompt->tokens.size());
    added.prompt_logprobs = std::move(prompt);
  }
  if (options_.parse.tokenizer) added.text.emplace(options_.parse.tokenizer, io::OutputText::Options{.stop = std::move(request.stop)});
}

void Admission::abort_rest(const std::string& error) {
  io::RequestItem item;
  int64_t index = 0;
  while (next_owned(&item, &index)) write_(index, not_started_record(item, error, /*with_text=*/options_.parse.tokenizer != nullptr));
}

}  // namespace deepinfer::pipeline
