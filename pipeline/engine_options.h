#pragma once
// The options of the two sides of a step that must agree, derived once from the job config
// and the model config: the Scheduler hands out block and slot ids, the ModelRunner holds the
// tensors behind them (and checks every id it is given against its pools).
// Owns: block size (model::kBlockTokens, the model cache's block), pool sizes (num_blocks with
// block 0 padding; num_slots = max_num_seqs + 1 with slot 0 padding), max_model_len (capped by
// the model's positions), the EOS id (the model config's) and the step budgets.
// Does not own: choosing the device and dtype (launch/), the runner's debugging options.

#include <ATen/ATen.h>

#include "engine/model_runner.h"
#include "engine/scheduler.h"
#include "model/model_config.h"
#include "pipeline/job_config.h"

namespace deepinfer::pipeline {

struct EngineOptions {
  engine::Scheduler::Options scheduler;
  engine::ModelRunner::Options runner;  // pools, dtype and device; debug_logits_path unset
};

EngineOptions engine_options(const JobConfig& job, const model::ModelConfig& model, at::ScalarType dtype, at::Device device);

}  // namespace deepinfer::pipeline
