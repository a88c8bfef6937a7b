// `deepinfer generate`, `deepinfer bench` and `deepinfer init-model`.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <random>

#include "engine/model_runner.h"
#include "io/durable_file.h"
#include "io/json_writer.h"
#include "launch/commands.h"
#include "launch/job_setup.h"
#include "model/checkpoint_writer.h"
#include "model/expert_parallel.h"
#include "pipeline/manifest.h"

namespace deepinfer::launch {
namespace {

std::atomic<bool> g_stop_requested{false};

extern "C" void on_stop_signal(int signal) {
  g_stop_requested.store(true);
  std::signal(signal, SIG_DFL);  // a second signal ends the process at once
}

void print_progress(const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); }

struct Running {
  pipeline::ModelSource model;
  model::SingleRankCommunicator comm;
  std::unique_ptr<engine::ModelRunner> runner;
};

std::unique_ptr<Running> start_model(const std::string& spec, const pipeline::JobConfig& config, at::Device device,
                                     at::ScalarType dtype) {
  auto running = std::make_unique<Running>();
  std::fprintf(stderr, "loading %s on %s (%s)...\n", spec.c_str(), hardware_description(device).c_str(),
               dtype == at::kBFloat16 ? "bfloat16" : "float32");
  running->model = pipeline::load_model_source(spec, dtype, device, config.seed);
  running->runner = std::make_unique<engine::ModelRunner>(
      *running->model.weights, running->comm,
      engine::ModelRunner::Options{.num_blocks = config.num_blocks, .num_slots = config.max_num_seqs + 1, .dtype = dtype,
                                   .device = device, .model = {}});
  return running;
}

}  // namespace

int generate_command(int argc, char** argv) {
  auto value_options = job_value_options();
  value_options.insert({"model", "input", "output"});
  Args args(argc, argv, 2, value_options, {"resume", "no-overlap"});
  if (!args.positionals().empty()) throw std::invalid_argument("unexpected argument '" + args.positionals()[0] + "'");
  const auto config = job_config_from(args);
  const auto inputs = args.all("input");
  if (inputs.empty()) throw std::invalid_argument("missing required option --input (may be repeated)");
  const std::string output = args.get("output");
  const at::Device device = resolve_device(config.device);
  const at::ScalarType dtype = resolve_dtype(config.dtype, device);

  auto running = start_model(args.get("model"), config, device, dtype);
  pipeline::JobOptions job = job_options_for(config, running->model.weights->config());
  job.inputs = inputs;
  job.output_dir = output;
  job.resume = args.flag("resume");
  job.job_json = job_fingerprint(config, running->model.fingerprint_json, inputs, device, dtype, /*world_size=*/1);
  job.stop_requested = &g_stop_requested;
  job.progress = print_progress;
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);

  const pipeline::JobOutcome outcome = pipeline::run_generate_job(job, *running->runner);
  if (outcome.interrupted) {
    std::fprintf(stderr, "stopped by a signal: %ld records kept in %s; rerun with --resume to finish\n", long(outcome.records),
                 output.c_str());
    return 130;
  }
  pipeline::write_manifest(output, job.job_json, 1);
  const std::string throughput = pipeline::write_summary(output, {outcome}, hardware_description(device));
  std::printf("%s\n", throughput.c_str());
  std::printf("done: %ld records in %s\n", long(outcome.records), output.c_str());
  return 0;
}

int init_model_command(int argc, char** argv) {
  Args args(argc, argv, 2, {"config", "output", "seed"}, {"experts-fp4", "fp8-linears", "float32"});
  model::InitModelOptions options;
  options.config_path = args.get("config");
  options.output_dir = args.get("output");
  options.seed = args.get_uint64("seed", 0);
  options.experts_fp4 = args.flag("experts-fp4");
  options.fp8_linears = args.flag("fp8-linears");
  if (args.flag("float32")) options.dense_dtype = io::DType::kF32;
  model::init_model(options);
  std::printf("wrote a random checkpoint (seed %llu) to %s\n", static_cast<unsigned long long>(options.seed),
              options.output_dir.c_str());
  return 0;
}

}  // namespace deepinfer::launch
