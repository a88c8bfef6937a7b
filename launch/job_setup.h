#pragma once
// Shared by `generate` and `bench`: turning command-line options into a JobConfig, the
// device and dtype, the loaded model and the job fingerprint.

#include <ATen/ATen.h>

#include <atomic>
#include <string>
#include <vector>

#include "launch/args.h"
#include "pipeline/engine_options.h"
#include "pipeline/generate_job.h"
#include "pipeline/job_config.h"
#include "pipeline/memory_plan.h"
#include "pipeline/model_source.h"

namespace deepinfer::launch {

// SIGINT/SIGTERM set the returned flag (a job stops admitting, flushes and returns interrupted);
// a second signal ends the process at once.
std::atomic<bool>& install_stop_handlers();

// Throws std::invalid_argument naming --`option` unless `path` can be written as a file: not
// empty, not a directory, in an existing directory this process may write.
void check_output_file(const std::string& option, const std::string& path);

// Options every model-running command accepts.
std::set<std::string> job_value_options();

// --job FILE (or configs/jobs/default.json values) with the command-line overrides applied.
pipeline::JobConfig job_config_from(const Args& args);

// "cuda" / "auto" with a GPU -> cuda:local_rank (one GPU per rank of the node; more ranks than
// visible GPUs is an error), made the current device; otherwise the CPU.
at::Device resolve_device(const std::string& device, int local_rank = 0);
at::ScalarType resolve_dtype(const std::string& dtype, at::Device device);
std::string hardware_description(at::Device device);

// This rank's memory plan for the model `spec` under `config` (pipeline/memory_plan.h), made
// before anything is loaded and printed to stderr by rank 0; throws std::invalid_argument with
// the plan and what to change when it does not fit.
pipeline::MemoryPlan check_memory_plan(const std::string& spec, const pipeline::JobConfig& config, at::Device device, at::ScalarType dtype,
                                       int rank = 0, int world_size = 1);
// On a CUDA device: the caching allocator's peak so far against the plan (weights, scratch,
// state and activations; the runtime reserve is outside the allocator), to stderr.
void print_peak_memory(const pipeline::MemoryPlan& plan, at::Device device);

// Job options for one rank; the scheduler's are engine.scheduler (pipeline/engine_options.h),
// the ones the model runner was built with.
pipeline::JobOptions job_options_for(const pipeline::JobConfig& config, const model::ModelConfig& model,
                                     const pipeline::EngineOptions& engine);

// The inputs' sha256 in order, read once a start (job_fingerprint is made before and after the
// model loads).
std::vector<std::string> input_digests(const std::vector<std::string>& inputs);

// The fingerprint of everything that decides the results (compared on --resume, kept in the
// manifest): model, inputs (sha256, `digests` of input_digests), seed, scheduler sizes, device,
// dtype, world size.
std::string job_fingerprint(const pipeline::JobConfig& config, const std::string& model_fingerprint, const std::vector<std::string>& inputs,
                            const std::vector<std::string>& digests, at::Device device, at::ScalarType dtype, int world_size);

}  // namespace deepinfer::launch
