#include "pipeline/model_source.h"

#include <filesystem>
#include <stdexcept>

#include "io/durable_file.h"
#include "io/json_writer.h"
#include "io/sha256.h"
#include "model/checkpoint_loader.h"
#include "model/expert_parallel.h"
#include "model/model_config.h"
#include "model/random_weights.h"
#include "pipeline/manifest.h"

namespace deepinfer::pipeline {

namespace {

bool is_random(const std::string& spec) { return spec.rfind("random:", 0) == 0; }

// A checkpoint folder is bad input when it is not a folder or has no config.json (reported as
// such, not as a config that fails to parse).
void check_checkpoint_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir))
    throw std::invalid_argument("--model " + dir + ": not a directory (a checkpoint folder with config.json, or random:CONFIG.json)");
  if (!fs::exists(fs::path(dir) / "config.json")) throw std::invalid_argument("--model " + dir + ": no config.json in the folder");
}

// Whether an error describes the model files (their contents), not the machine: the io and
// loader checks name "safetensors FILE" or "checkpoint DIR". Those are bad input, as a bad
// config.json or tokenizer.json is (exit 2); out of memory and the like stay errors (exit 1).
bool names_model_files(const std::string& message) { return message.rfind("safetensors ", 0) == 0 || message.rfind("checkpoint", 0) == 0; }

// Bad input named as such before anything is read: a checkpoint folder without config.json, a
// random: config that is not a file.
void check_spec(const std::string& spec) {
  if (!is_random(spec)) {
    check_checkpoint_dir(spec);
  } else if (!std::filesystem::is_regular_file(spec.substr(7))) {
    throw std::invalid_argument("--model " + spec + ": no such config file");
  }
}

// read(), with the errors that name the model files turned into std::invalid_argument.
template <typename Read>
auto as_bad_input(const Read& read) -> decltype(read()) {
  try {
    return read();
  } catch (const std::runtime_error& error) {
    if (names_model_files(error.what())) throw std::invalid_argument(error.what());
    throw;
  } catch (const c10::Error& error) {
    if (names_model_files(error.what_without_backtrace())) throw std::invalid_argument(error.what_without_backtrace());
    throw;
  }
}

ModelLayout layout_unchecked(const std::string& spec, at::ScalarType dtype, int rank, int world_size) {
  ModelLayout layout;
  if (is_random(spec)) {
    const std::string config_path = spec.substr(7);
    const std::string config_text = io::read_file(config_path);
    layout.config = model::parse_model_config(config_text, config_path);
    layout.format = model::announced_format(config_text, dtype == at::kBFloat16 ? io::DType::kBF16 : io::DType::kF32);
  } else {
    layout.config = model::load_model_config(spec);
    const io::Checkpoint checkpoint = io::Checkpoint::open(spec);
    layout.format = model::detect_format(checkpoint, layout.config, model::detect_spelling(checkpoint),
                                         model::expert_range_for_rank(layout.config.n_routed_experts, rank, world_size));
  }
  layout.experts = model::expert_range_for_rank(layout.config.n_routed_experts, rank, world_size);
  return layout;
}

ModelSource load_unchecked(const std::string& spec, at::ScalarType dtype, at::Device device, uint64_t random_seed, int rank, int world_size,
                           bool keep_fp8) {
  ModelSource source;
  auto experts_of = [&](const model::ModelConfig& config) -> std::optional<model::ExpertRange> {
    if (world_size <= 1) return std::nullopt;
    return model::expert_range_for_rank(config.n_routed_experts, rank, world_size);
  };
  io::JsonWriter w;
  if (is_random(spec)) {
    const std::string config_path = spec.substr(7);
    const std::string config_text = io::read_file(config_path);
    const model::ModelConfig config = model::parse_model_config(config_text, config_path);
    const model::WeightFormat format = model::announced_format(config_text, dtype == at::kBFloat16 ? io::DType::kBF16 : io::DType::kF32);
    source.weights =
        std::make_unique<model::ModelWeights>(model::random_weights(config, format, random_seed, device, experts_of(config), keep_fp8));
    w.begin_object().key("source").value("random").key("config_sha256").value(io::sha256_hex(config_text));
    w.key("seed").value(random_seed).key("fp4_experts").value(format.fp4_experts).key("fp8_linears").value(format.fp8_linears);
    w.key("drawn_on").value(device.is_cuda() ? "cuda" : "cpu").end_object();  // keep_fp8 changes no value: it is in job.json
  } else {
    model::LoadOptions options;
    options.dtype = dtype;
    options.device = device;
    options.experts = experts_of(model::load_model_config(spec));
    options.keep_fp8 = keep_fp8;
    source.weights = std::make_unique<model::ModelWeights>(model::load_checkpoint(spec, options));
    const auto tokenizer_path = std::filesystem::path(spec) / "tokenizer.json";
    if (std::filesystem::exists(tokenizer_path)) source.tokenizer = io::Tokenizer::load(tokenizer_path.string());
    w.begin_object().key("source").value("checkpoint").key("checkpoint").raw(checkpoint_fingerprint(spec)).end_object();
  }
  source.fingerprint_json = w.take();
  return source;
}

}  // namespace

ModelLayout model_layout(const std::string& spec, at::ScalarType dtype, int rank, int world_size, bool keep_fp8) {
  check_spec(spec);
  ModelLayout layout = as_bad_input([&] { return layout_unchecked(spec, dtype, rank, world_size); });
  layout.keep_fp8 = keep_fp8 && layout.format.fp8_linears;
  return layout;
}

ModelSource load_model_source(const std::string& spec, at::ScalarType dtype, at::Device device, uint64_t random_seed, int rank,
                              int world_size, bool keep_fp8) {
  check_spec(spec);
  return as_bad_input([&] { return load_unchecked(spec, dtype, device, random_seed, rank, world_size, keep_fp8); });
}

}  // namespace deepinfer::pipeline
