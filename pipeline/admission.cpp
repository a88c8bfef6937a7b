#include "pipeline/admission.h"

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
  params.logprobs = request.logprobs > 0 ? static_cast<int32_t>(request.logprobs) : -1;
  return params;
}

}  // namespace

Admission::Admission(Options options, WriteRecord write)
    : options_(std::move(options)),
      write_(std::move(write)),
      reader_(options_.inputs, {.parse = options_.parse}),
      owner_(options_.world_size) {}

// The next item of this rank's input, skipping what a resumed run already wrote.
bool Admission::next_owned(io::RequestItem* item, int64_t* index) {
  while (reader_.next(item)) {
    if (owner_.next(sharding_tokens(*item)) != options_.rank) continue;
    *index = next_index_++;
    if (*index >= options_.skip) return true;
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
    add(scheduler, live, std::get<io::RequestLine>(item), index);
  }
}

void Admission::add(engine::Scheduler& scheduler, LiveRequests& live, io::RequestLine& request, int64_t index) {
  const uint64_t seed = request.seed ? *request.seed : engine::derive_request_seed(options_.job_seed, request.id);
  const engine::SeqId id = scheduler.add_request(request.id, std::move(request.prompt_token_ids), to_sampling_params(request, seed));
  LiveRequest& added = live.emplace(id, LiveRequest{index, request.input, seed, Clock::now(), std::nullopt, std::nullopt}).first->second;
  if (options_.parse.tokenizer) added.text.emplace(options_.parse.tokenizer, io::OutputText::Options{.stop = std::move(request.stop)});
}

void Admission::abort_rest(const std::string& error) {
  io::RequestItem item;
  int64_t index = 0;
  while (next_owned(&item, &index)) write_(index, not_started_record(item, error, /*with_text=*/options_.parse.tokenizer != nullptr));
}

}  // namespace deepinfer::pipeline
