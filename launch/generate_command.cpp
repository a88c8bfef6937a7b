// `deepinfer generate`, `deepinfer bench` and `deepinfer init-model`.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "engine/model_runner.h"
#include "io/durable_file.h"
#include "io/json_writer.h"
#include "io/request_reader.h"
#include "io/tiny_tokenizer.h"
#include "launch/commands.h"
#include "launch/exit_code.h"
#include "launch/job_setup.h"
#include "launch/mpi_session.h"
#include "model/checkpoint_writer.h"
#include "model/expert_parallel.h"
#include "model/model_config.h"
#include "model/weight_specs.h"
#include "pipeline/job_files.h"
#include "pipeline/manifest.h"
#include "pipeline/mpi_communicator.h"
#include "pipeline/nccl_communicator.h"

namespace deepinfer::launch {
namespace {

void print_progress(const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); }

// DEEPINFER_DEBUG_LOGITS=PREFIX: each rank dumps its sampled rows' logits to
// PREFIX.rank-R.jsonl (engine/model_runner.h); unset: no dump.
std::string debug_logits_path(int rank) {
  const char* prefix = std::getenv("DEEPINFER_DEBUG_LOGITS");
  return prefix != nullptr && *prefix ? std::string(prefix) + ".rank-" + std::to_string(rank) + ".jsonl" : std::string();
}

struct Running {
  pipeline::ModelSource model;
  pipeline::EngineOptions engine;  // the scheduler's and the runner's, from one derivation
  pipeline::MemoryPlan plan;
  std::unique_ptr<model::ExpertCommunicator> comm;
  std::unique_ptr<engine::ModelRunner> runner;
};

std::unique_ptr<Running> start_model(const std::string& spec, const pipeline::JobConfig& config, at::Device device, at::ScalarType dtype,
                                     const MpiSession& mpi) {
  auto running = std::make_unique<Running>();
  running->plan = check_memory_plan(spec, config, device, dtype, mpi.rank(), mpi.world_size());
  std::fprintf(stderr, "[rank %d/%d] loading %s on %s (%s)...\n", mpi.rank(), mpi.world_size(), spec.c_str(),
               hardware_description(device).c_str(), dtype == at::kBFloat16 ? "bfloat16" : "float32");
  if (mpi.world_size() > 1 && device.is_cuda()) {
    running->comm = pipeline::make_nccl_communicator(device);
  } else if (mpi.world_size() > 1) {
    running->comm = std::make_unique<pipeline::MpiCommunicator>();
  } else {
    running->comm = std::make_unique<model::SingleRankCommunicator>();
  }
  running->model = pipeline::load_model_source(spec, dtype, device, config.seed, mpi.rank(), mpi.world_size(), config.keep_fp8_linears);
  if (mpi.rank() == 0) {
    std::fprintf(stderr, "%s\n",
                 running->model.tokenizer ? ("tokenizer: " + std::to_string(running->model.tokenizer->vocab_size()) +
                                             " tokens (text prompts, stop strings, \"text\" in results)")
                                                .c_str()
                                          : "no tokenizer.json: token-id prompts only");
  }
  running->engine = pipeline::engine_options(config, running->model.weights->config(), dtype, device);
  engine::ModelRunner::Options runner = running->engine.runner;
  runner.debug_logits_path = debug_logits_path(mpi.rank());
  running->runner = std::make_unique<engine::ModelRunner>(*running->model.weights, *running->comm, runner);
  return running;
}

// The end of a finished job: the ranks' outcomes gathered (a collective: rank 0 returns from
// it only after every rank closed its results file), then rank 0 writes manifest.json and
// summary.json and prints the figures.
void finish_job(const pipeline::JobOutcome& outcome, const std::string& job_json, const std::string& output, at::Device device,
                const MpiSession& mpi) {
  const auto outcomes = mpi.gather_outcomes(outcome);
  if (mpi.rank() != 0) return;
  pipeline::write_manifest(output, job_json, mpi.world_size());
  const bool nothing_ran = std::all_of(outcomes.begin(), outcomes.end(), [](const auto& o) { return o.was_complete; });
  if (nothing_ran && std::filesystem::exists(std::filesystem::path(output) / "summary.json")) {
    // --resume of a finished job: summary.json keeps the figures of the run that did the work.
    std::printf("nothing to do: %s already holds the finished job; summary.json kept\n", output.c_str());
    return;
  }
  const std::string throughput =
      pipeline::write_summary(output, outcomes,
                              mpi.world_size() > 1 ? std::to_string(mpi.world_size()) + " ranks, rank 0 on " + hardware_description(device)
                                                   : hardware_description(device));
  std::printf("%s\n", throughput.c_str());
  int64_t records = 0;
  for (const auto& o : outcomes) records += o.records;
  std::printf("done: %ld records in %s (%d rank%s)\n", long(records), output.c_str(), mpi.world_size(), mpi.world_size() > 1 ? "s" : "");
}

int run_generate(int argc, char** argv, const MpiSession& mpi) {
  auto value_options = job_value_options();
  value_options.insert({"model", "input", "output"});
  // Installed first: a signal during model loading must also leave a resumable directory.
  std::atomic<bool>& stop_requested = install_stop_handlers();
  Args args(argc, argv, 2, value_options, {"resume", "no-overlap", "no-cuda-graphs", "batch-invariant", "keep-fp8-linears"});
  if (!args.positionals().empty()) throw std::invalid_argument("unexpected argument '" + args.positionals()[0] + "'");
  const auto config = job_config_from(args);
  const auto inputs = args.all("input");
  if (inputs.empty()) throw std::invalid_argument("missing required option --input (may be repeated)");
  const std::string output = args.get("output");
  io::check_input_files(inputs);  // before the model loads and the output directory exists
  pipeline::check_output_dir(output);
  if (!pipeline::lock_output_dir(output, mpi.rank())) pipeline::throw_output_in_use(output);  // before the model loads
  const at::Device device = resolve_device(config.device, mpi.local_rank());
  const at::ScalarType dtype = resolve_dtype(config.dtype, device);
  const std::vector<std::string> digests = input_digests(inputs);
  if (args.flag("resume")) {  // what the job.json of OUT can refuse without the model, refused before it loads
    pipeline::check_resumed_job(output, job_fingerprint(config, "null", inputs, digests, device, dtype, mpi.world_size()), {"model"});
  }

  auto running = start_model(args.get("model"), config, device, dtype, mpi);
  pipeline::JobOptions job = job_options_for(config, running->model.weights->config(), running->engine);
  job.tokenizer = running->model.tokenizer;
  job.inputs = inputs;
  job.output_dir = output;
  job.resume = args.flag("resume");
  job.job_json = job_fingerprint(config, running->model.fingerprint_json, inputs, digests, device, dtype, mpi.world_size());
  job.rank = mpi.rank();
  job.world_size = mpi.world_size();
  if (mpi.world_size() > 1) {
    job.lockstep = [fail = injected_failure_rank() == mpi.rank(), calls = 0](pipeline::LockstepFlags mine) mutable {
      // Call 1 is the output directory check; calls 2.. are steps 1...
      if (fail && ++calls == 4) throw std::runtime_error("injected failure (DEEPINFER_FAIL_RANK) at step 3");
      const auto all = pipeline::mpi_any_rank({mine.busy, mine.stop});
      return pipeline::LockstepFlags{.busy = all[0], .stop = all[1]};
    };
  }
  job.stop_requested = &stop_requested;
  job.progress = print_progress;

  const pipeline::JobOutcome outcome = pipeline::GenerateJob(job, *running->runner).run();
  if (outcome.interrupted) {
    std::fprintf(stderr, "%sstopped by a signal: %ld records kept in %s; rerun with --resume to finish\n",
                 mpi.world_size() > 1 ? ("[rank " + std::to_string(mpi.rank()) + "] ").c_str() : "", long(outcome.records), output.c_str());
    return 130;
  }
  finish_job(outcome, job.job_json, output, device, mpi);
  print_peak_memory(running->plan, device);
  return 0;
}

// init-model: the tiny tokenizer (io/tiny_tokenizer.h) as DIR/tokenizer.json, so text prompts
// work on the random checkpoint, when the config's vocabulary and BOS/EOS ids fit it.
void write_tiny_tokenizer_for(const model::ModelConfig& config, const std::string& dir) {
  if (config.vocab_size < io::kTinyMinVocabSize || config.vocab_size > INT32_MAX || config.bos_token_id != io::kTinyBosId ||
      config.eos_token_id != io::kTinyEosId) {
    std::fprintf(stderr,
                 "init-model: note: no tokenizer.json written (the tiny tokenizer needs vocab_size >= %d, bos_token_id %d and "
                 "eos_token_id %d; the config has %ld, %ld and %ld): only token-id prompts will work\n",
                 io::kTinyMinVocabSize, io::kTinyBosId, io::kTinyEosId, long(config.vocab_size), long(config.bos_token_id),
                 long(config.eos_token_id));
    return;
  }
  const std::string path = (std::filesystem::path(dir) / "tokenizer.json").string();
  io::write_tiny_tokenizer(path, static_cast<int32_t>(config.vocab_size));
  const auto tokenizer = io::Tokenizer::load(path);
  TORCH_INTERNAL_ASSERT(tokenizer->vocab_size() <= config.vocab_size && tokenizer->encode("x", true).front() == config.bos_token_id &&
                            tokenizer->is_special(static_cast<int32_t>(config.eos_token_id)),
                        "the tiny tokenizer written to ", path, " does not fit the config");
  std::printf("wrote tokenizer.json (byte-level BPE, %d tokens) to %s\n", tokenizer->vocab_size(), dir.c_str());
}

// What init-model cannot do, refused before it writes anything: an --output that cannot be a
// directory or already holds a checkpoint, a checkpoint larger than its filesystem's free
// space, or a tensor larger than this machine's memory (each is drawn whole).
void check_init_model(const model::InitModelOptions& options) {
  namespace fs = std::filesystem;
  pipeline::check_output_dir(options.output_dir);
  try {
    model::check_no_checkpoint(options.output_dir);
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument(std::string("--output ") + error.what());
  }
  std::error_code error;
  const model::ModelConfig config = model::load_model_config(options.config_path);
  double total = 0, largest = 0;
  std::string largest_name;
  for (const auto& spec : model::weight_specs(config, {options.dense_dtype, options.fp8_linears, options.experts_fp4})) {
    double stored = static_cast<double>(io::dtype_size(spec.dtype)), drawn = 4;  // drawn in float32
    for (int64_t d : spec.shape) stored *= static_cast<double>(d);
    for (int64_t d : spec.logical_shape) drawn *= static_cast<double>(d);
    total += stored;
    if (drawn > largest) largest = drawn, largest_name = spec.name;
  }
  fs::path existing = fs::absolute(options.output_dir);
  while (!fs::exists(existing, error)) existing = existing.parent_path();
  const auto gb = [](double bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f GB", bytes / 1e9);
    return std::string(text);
  };
  const double free = static_cast<double>(fs::space(existing, error).available);
  if (!error && total > free)
    throw std::invalid_argument("the checkpoint of " + options.config_path + " takes " + gb(total) + "; " + existing.string() + " has " +
                                gb(free) + " free");
  const double memory = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  if (memory > 0 && 2 * largest > memory)
    throw std::invalid_argument("tensor " + largest_name + " of " + options.config_path + " takes " + gb(largest) +
                                " as drawn (float32), more than half of this machine's " + gb(memory));
}

}  // namespace

int generate_command(int argc, char** argv) {
  MpiSession mpi;
  if (mpi.world_size() == 1) return run_generate(argc, argv, mpi);
  try {
    return run_generate(argc, argv, mpi);
  } catch (const std::exception& error) {
    mpi.abort_job(error.what(), exit_code_of(error));  // the exit code one rank alone would give
  }
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
  check_init_model(options);
  model::init_model(options);
  std::printf("wrote a random checkpoint (seed %llu) to %s\n", static_cast<unsigned long long>(options.seed), options.output_dir.c_str());
  write_tiny_tokenizer_for(model::load_model_config(options.output_dir), options.output_dir);
  return 0;
}

}  // namespace deepinfer::launch
