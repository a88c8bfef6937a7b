#include "pipeline/engine_options.h"

#include <algorithm>

namespace deepinfer::pipeline {

EngineOptions engine_options(const JobConfig& job, const model::ModelConfig& model, at::ScalarType dtype, at::Device device) {
  const int32_t num_slots = job.max_num_seqs + 1;  // one per running sequence, plus the padding slot 0
  EngineOptions o;
  o.scheduler = {.block_size = static_cast<int32_t>(model::kBlockTokens),
                 .num_blocks = job.num_blocks,
                 .num_slots = num_slots,
                 .max_num_seqs = job.max_num_seqs,
                 .max_num_batched_tokens = job.max_num_batched_tokens,
                 .max_model_len = static_cast<int32_t>(std::min<int64_t>(job.max_model_len, model.max_position_embeddings)),
                 .eos_token_id = static_cast<int32_t>(model.eos_token_id),
                 .watermark_blocks = 0};
  o.runner = {.num_blocks = job.num_blocks,
              .num_slots = num_slots,
              .dtype = dtype,
              .device = device,
              .model = {.arithmetic = job.batch_invariant ? &model::Arithmetic::batch_invariant() : &model::Arithmetic::official()},
              .cuda_graphs = job.cuda_graphs,
              .max_blocks_per_seq = (o.scheduler.max_model_len + model::kBlockTokens - 1) / model::kBlockTokens,
              .debug_logits_path = {}};
  return o;
}

}  // namespace deepinfer::pipeline
