#include "launch/job_setup.h"

#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "engine/cuda/kernels.h"
#include "io/json_writer.h"
#include "pipeline/manifest.h"
#include "pipeline/nccl_communicator.h"

namespace deepinfer::launch {

namespace {

std::atomic<bool> g_stop_requested{false};

extern "C" void on_stop_signal(int signal) {
  g_stop_requested.store(true);
  std::signal(signal, SIG_DFL);  // a second signal ends the process at once
}

}  // namespace

std::atomic<bool>& install_stop_handlers() {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  return g_stop_requested;
}

void check_output_file(const std::string& option, const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) throw std::invalid_argument("--" + option + " is empty");
  std::error_code error;
  if (fs::is_directory(path, error)) throw std::invalid_argument("--" + option + " " + path + " is a directory");
  const fs::path parent = fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
  if (!fs::is_directory(parent, error))
    throw std::invalid_argument("--" + option + " " + path + ": " + parent.string() + " is not a directory");
  if (::access(parent.c_str(), W_OK | X_OK) != 0)
    throw std::invalid_argument("--" + option + " " + path + ": cannot write in " + parent.string() + ": " + std::strerror(errno));
}

std::set<std::string> job_value_options() {
  return {"job", "seed", "max-num-seqs", "max-num-batched-tokens", "num-blocks", "max-model-len", "device", "dtype", "deadline"};
}

pipeline::JobConfig job_config_from(const Args& args) {
  pipeline::JobConfig c = args.has("job") ? pipeline::JobConfig::load(args.get("job")) : pipeline::JobConfig{};
  c.seed = args.get_uint64("seed", c.seed);
  using pipeline::IntRange;
  const auto get = [&](const char* name, int32_t fallback, IntRange range) {
    return static_cast<int32_t>(args.get_int(name, fallback, range.lo, range.hi));  // in int32 range: no wrap
  };
  c.max_num_seqs = get("max-num-seqs", c.max_num_seqs, pipeline::kMaxNumSeqsRange);
  c.max_num_batched_tokens = get("max-num-batched-tokens", c.max_num_batched_tokens, pipeline::kMaxNumBatchedTokensRange);
  c.num_blocks = get("num-blocks", c.num_blocks, pipeline::kNumBlocksRange);
  c.max_model_len = get("max-model-len", c.max_model_len, pipeline::kMaxModelLenRange);
  c.device = args.get_or("device", c.device);
  c.dtype = args.get_or("dtype", c.dtype);
  if (args.has("deadline")) c.deadline_s = args.get_double("deadline", 0.0, 0.0);
  if (args.flag("no-overlap")) c.overlap = false;
  if (args.flag("no-cuda-graphs")) c.cuda_graphs = false;
  if (args.flag("batch-invariant")) c.batch_invariant = true;
  if (args.flag("keep-fp8-linears")) c.keep_fp8_linears = true;
  c.validate();
  return c;
}

at::Device resolve_device(const std::string& device, int local_rank) {
  if (device == "cuda" || (device == "auto" && at::hasCUDA())) {
    if (!at::hasCUDA()) throw std::invalid_argument("--device cuda: no CUDA device is visible");
    const int gpus = static_cast<int>(at::getNumGPUs());
    if (local_rank >= gpus) {
      throw std::invalid_argument("rank " + std::to_string(local_rank) + " of this node has no GPU of its own: " + std::to_string(gpus) +
                                  " visible; start at most one rank per GPU (mpirun -np), or use --device cpu");
    }
    const at::Device cuda(at::kCUDA, static_cast<c10::DeviceIndex>(local_rank));
    pipeline::select_cuda_device(cuda);
    return cuda;
  }
  return at::kCPU;
}

at::ScalarType resolve_dtype(const std::string& dtype, at::Device device) {
  if (dtype == "bfloat16" || (dtype == "auto" && device.is_cuda())) return at::kBFloat16;
  return at::kFloat;
}

std::string hardware_description(at::Device device) {
  if (device.is_cuda()) return "cuda:" + std::to_string(device.index());
  return "cpu (" + std::to_string(std::thread::hardware_concurrency()) + " threads)";
}

pipeline::MemoryPlan check_memory_plan(const std::string& spec, const pipeline::JobConfig& config, at::Device device, at::ScalarType dtype,
                                       int rank, int world_size) {
  const pipeline::ModelLayout layout = pipeline::model_layout(spec, dtype, rank, world_size, config.keep_fp8_linears);
  const pipeline::EngineOptions engine = pipeline::engine_options(config, layout.config, dtype, device);
  const pipeline::MemoryPlan plan = pipeline::plan_memory(layout, engine, rank, world_size, pipeline::available_memory(device));
  if (!plan.fits()) {
    throw std::invalid_argument("model " + spec + ": the memory plan of rank " + std::to_string(rank) + " does not fit " + plan.device +
                                "; " + pipeline::advice(plan, layout, engine) + "\n" + pipeline::describe(plan));
  }
  if (rank == 0) std::fprintf(stderr, "%s\n", pipeline::describe(plan).c_str());
  return plan;
}

void print_peak_memory(const pipeline::MemoryPlan& plan, at::Device device) {
  if (!device.is_cuda()) return;
  const auto memory = engine::cuda::device_memory(device);
  const int64_t planned = plan.needed() - plan.runtime_reserve;
  std::fprintf(stderr,
               "device memory on %s: allocator peak %.2f GiB allocated, %.2f GiB reserved; plan %.2f GiB without the runtime reserve\n",
               plan.device.c_str(), memory.peak_allocated / 1073741824.0, memory.peak_reserved / 1073741824.0, planned / 1073741824.0);
}

pipeline::JobOptions job_options_for(const pipeline::JobConfig& config, const model::ModelConfig& model,
                                     const pipeline::EngineOptions& engine) {
  pipeline::JobOptions o;
  o.seed = config.seed;
  o.scheduler = engine.scheduler;
  o.vocab_size = model.vocab_size;
  o.bos_token_id = static_cast<int32_t>(model.bos_token_id);
  o.overlap = config.overlap;
  o.deadline_s = config.deadline_s;
  o.progress_interval_s = config.progress_interval_s;
  o.flush_interval_s = config.flush_interval_s;
  return o;
}

std::vector<std::string> input_digests(const std::vector<std::string>& inputs) {
  std::vector<std::string> digests;
  for (const auto& input : inputs) digests.push_back(pipeline::sha256_of_file(input));
  return digests;
}

std::string job_fingerprint(const pipeline::JobConfig& config, const std::string& model_fingerprint, const std::vector<std::string>& inputs,
                            const std::vector<std::string>& digests, at::Device device, at::ScalarType dtype, int world_size) {
  io::JsonWriter w;
  w.begin_object().key("model").raw(model_fingerprint).key("inputs").begin_array();
  for (size_t i = 0; i < inputs.size(); ++i) w.begin_object().key("file").value(inputs[i]).key("sha256").value(digests.at(i)).end_object();
  w.end_array();
  w.key("seed").value(config.seed).key("max_num_seqs").value(config.max_num_seqs);
  w.key("max_num_batched_tokens").value(config.max_num_batched_tokens).key("num_blocks").value(config.num_blocks);
  w.key("max_model_len").value(config.max_model_len).key("overlap").value(config.overlap).key("cuda_graphs").value(config.cuda_graphs);
  w.key("batch_invariant").value(config.batch_invariant).key("keep_fp8_linears").value(config.keep_fp8_linears);
  w.key("device").value(device.is_cuda() ? "cuda" : "cpu").key("dtype").value(dtype == at::kBFloat16 ? "bfloat16" : "float32");
  w.key("world_size").value(world_size).key("sharding").value(pipeline::kShardingName);
  w.end_object();
  return w.take();
}

}  // namespace deepinfer::launch
