#include "model/checkpoint_writer.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <vector>

#include "io/durable_file.h"
#include "io/json_writer.h"
#include "io/safetensors.h"
#include "model/quant.h"
#include "model/random_weights.h"

namespace deepinfer::model {
namespace {

namespace fs = std::filesystem;

// Shortest round-trip text, always readable as a float ("10.0", not "10").
std::string real(double value) {
  TORCH_CHECK(std::isfinite(value), "config_json: non-finite number ", value);
  char buffer[40];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  std::string text(buffer, result.ptr);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

std::string json_string(std::string_view text) { return io::json_escape(text); }

// "[a, b, c]" from already-serialized JSON values.
std::string json_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out + "]";
}

std::string int_list(const std::vector<int64_t>& values) {
  std::vector<std::string> items;
  for (int64_t v : values) items.push_back(std::to_string(v));
  return json_list(items);
}

// Hash layers as a prefix count, or -1 when they are not a prefix.
int64_t hash_prefix(const ModelConfig& c) {
  const int64_t n = c.num_hash_layers();
  for (int64_t l = 0; l < c.num_layers; ++l)
    if (c.is_hash_layer(l) != (l < n)) return -1;
  return n;
}

// The official spelling ties CSA to ratio 4 (model_config.cpp parse_layers).
bool ratios_say_types(const ModelConfig& c) {
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const int64_t r = c.compress_ratio(l);
    const LayerType expected = r == 0 ? LayerType::kSliding : r == 4 ? LayerType::kCsa : LayerType::kHca;
    if (expected != c.layer_type(l)) return false;
  }
  return true;
}

std::string layer_types_json(const ModelConfig& c) {
  std::vector<std::string> items;
  for (int64_t l = 0; l < c.num_layers; ++l) items.push_back(json_string(layer_type_name(c.layer_type(l))));
  return json_list(items);
}

// {"compressed_sparse_attention": r, "heavily_compressed_attention": r}; one rate per type.
std::string compress_rates_json(const ModelConfig& c) {
  std::map<std::string_view, int64_t> rates;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    if (c.layer_type(l) == LayerType::kSliding) continue;
    auto [it, inserted] = rates.emplace(layer_type_name(c.layer_type(l)), c.compress_ratio(l));
    TORCH_CHECK(it->second == c.compress_ratio(l), "config_json: layers of type ", std::string(it->first),
                " have different compress ratios (", it->second, " and ", c.compress_ratio(l),
                "); neither config spelling can express that");
  }
  std::string out = "{";
  for (const auto& [name, rate] : rates) out += (out.size() > 1 ? ", " : "") + json_string(name) + ": " + std::to_string(rate);
  return out + "}";
}

std::string mlp_types_json(const ModelConfig& c) {
  std::vector<std::string> items;
  for (int64_t l = 0; l < c.num_layers; ++l) items.push_back(json_string(c.is_hash_layer(l) ? "hash_moe" : "moe"));
  return json_list(items);
}

// Converts a CPU tensor to its storage bytes; the dtype must match the spec's storage dtype.
void add_tensor(io::SafetensorsWriter& writer, const std::string& name, io::DType dtype, const std::vector<int64_t>& shape,
                const at::Tensor& tensor) {
  const at::Tensor t = tensor.cpu().contiguous();
  TORCH_CHECK(t.sizes() == at::IntArrayRef(shape), "write_checkpoint: tensor ", name, " has shape ", t.sizes(), ", its spec says ",
              at::IntArrayRef(shape));
  TORCH_CHECK(t.element_size() == static_cast<int64_t>(io::dtype_size(dtype)), "write_checkpoint: tensor ", name, " is ", t.scalar_type(),
              ", cannot store it as ", std::string(io::dtype_name(dtype)));
  writer.add(name, dtype, shape, t.data_ptr(), t.numel() * t.element_size());
}

// Cuts the tensors into shards in spec order and writes each shard once it is complete.
class ShardedWriter final {
 public:
  ShardedWriter(std::string dir, const std::vector<WeightSpec>& specs, uint64_t max_shard_bytes) : dir_(std::move(dir)) {
    uint64_t current = 0;
    int64_t shard = 0;
    for (const WeightSpec& spec : specs) {
      uint64_t bytes = io::dtype_size(spec.dtype);
      for (int64_t d : spec.shape) bytes *= static_cast<uint64_t>(d);
      if (current > 0 && current + bytes > max_shard_bytes) {
        ++shard;
        current = 0;
      }
      current += bytes;
      total_bytes_ += bytes;
      shard_of_[spec.name] = shard;
      specs_[spec.name] = &spec;
    }
    num_shards_ = shard + 1;
  }

  void add(const std::string& name, const at::Tensor& tensor) {
    auto it = shard_of_.find(name);
    TORCH_INTERNAL_ASSERT(it != shard_of_.end(), "write_checkpoint: tensor ", name, " is not in the spec list");
    TORCH_INTERNAL_ASSERT(it->second >= current_, "write_checkpoint: tensor ", name, " came out of spec order");
    while (it->second > current_) flush();
    const WeightSpec& spec = *specs_.at(name);
    add_tensor(writer_, name, spec.dtype, spec.shape, tensor);
    written_.push_back(name);
  }

  void finish() {
    TORCH_INTERNAL_ASSERT(written_.size() == shard_of_.size(), "write_checkpoint: wrote ", written_.size(), " of ", shard_of_.size(),
                          " tensors");
    flush();
    if (num_shards_ == 1) return;
    io::JsonWriter index;
    index.begin_object().key("metadata").begin_object().key("total_size").value(total_bytes_).end_object();
    index.key("weight_map").begin_object();
    for (const auto& [name, shard] : shard_of_) index.key(name).value(file_name(shard));
    index.end_object().end_object();
    io::write_file_atomically((fs::path(dir_) / "model.safetensors.index.json").string(), index.str() + "\n");
  }

 private:
  std::string file_name(int64_t shard) const {
    if (num_shards_ == 1) return "model.safetensors";
    char buffer[64];
    std::snprintf(buffer, sizeof(buffer), "model-%05lld-of-%05lld.safetensors", static_cast<long long>(shard + 1),
                  static_cast<long long>(num_shards_));
    return buffer;
  }

  void flush() {
    writer_.write((fs::path(dir_) / file_name(current_)).string());
    writer_ = io::SafetensorsWriter();
    ++current_;
  }

  std::string dir_;
  std::map<std::string, int64_t> shard_of_;
  std::map<std::string, const WeightSpec*> specs_;
  std::vector<std::string> written_;
  uint64_t total_bytes_ = 0;
  int64_t num_shards_ = 1;
  int64_t current_ = 0;
  io::SafetensorsWriter writer_;
};

void prepare_dir(const std::string& dir) {
  fs::create_directories(dir);
  check_no_checkpoint(dir);
}

// Calls emit(name, storage tensor) for every spec of the format, in spec order.
// dense(spec) gives a spec's logical value in any float dtype; packed(spec) the in-memory
// FP4 pair of a routed expert when it has one.
using DenseFn = std::function<at::Tensor(const WeightSpec&)>;
using PackedFn = std::function<std::optional<std::pair<at::Tensor, at::Tensor>>(const WeightSpec&)>;

void write_tensors(const ModelConfig& config, const WeightFormat& format, const std::string& dir, const WriteOptions& options,
                   const DenseFn& dense, const PackedFn& packed) {
  prepare_dir(dir);
  const std::vector<WeightSpec> specs = weight_specs(config, format);
  ShardedWriter writer(dir, specs, options.max_shard_bytes);
  const at::ScalarType dense_dtype = torch_dtype(format.dense_dtype);
  for (const WeightSpec& spec : specs) {
    switch (spec.kind) {
      case WeightKind::kFp8Scale:
      case WeightKind::kFp4Scale: break;  // written with their weight
      case WeightKind::kDense: writer.add(spec.name, dense(spec).to(dense_dtype)); break;
      case WeightKind::kFloat32: writer.add(spec.name, dense(spec).to(at::kFloat)); break;
      case WeightKind::kInt64: writer.add(spec.name, dense(spec).to(at::kLong)); break;
      case WeightKind::kFp8Weight: {
        auto [codes, scale] = quantize_fp8_blockwise(dense(spec).to(at::kFloat));
        writer.add(spec.name, codes);
        writer.add(scale_name(spec.name), scale);
        break;
      }
      case WeightKind::kFp4Weight: {
        auto pair = packed(spec);
        if (!pair) pair = quantize_fp4(dense(spec).to(at::kFloat));
        writer.add(spec.name, pair->first);
        writer.add(scale_name(spec.name), pair->second);
        break;
      }
    }
  }
  writer.finish();
  io::write_file_atomically((fs::path(dir) / "config.json").string(), config_json(config, format));
}

}  // namespace

void check_no_checkpoint(const std::string& dir) {
  std::error_code error;
  if (!fs::is_directory(dir, error)) return;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    if (entry.path().extension() == ".safetensors" || file == "model.safetensors.index.json")
      throw std::invalid_argument(dir + " already holds a checkpoint (" + file + "); write into an empty or new directory");
  }
}

std::string config_json(const ModelConfig& c, const WeightFormat& format) {
  c.validate();
  std::vector<std::pair<std::string, std::string>> keys = {
      {"architectures", "[\"DeepseekV4ForCausalLM\"]"},
      {"model_type", json_string("deepseek_v4")},
      {"torch_dtype", json_string(format.dense_dtype == io::DType::kBF16 ? "bfloat16" : "float32")},
      {"vocab_size", std::to_string(c.vocab_size)},
      {"bos_token_id", std::to_string(c.bos_token_id)},
      {"eos_token_id", std::to_string(c.eos_token_id)},
      {"hidden_size", std::to_string(c.hidden_size)},
      {"num_hidden_layers", std::to_string(c.num_layers)},
      {"num_attention_heads", std::to_string(c.num_heads)},
      {"num_key_value_heads", std::to_string(c.num_kv_heads)},
      {"head_dim", std::to_string(c.head_dim)},
      {"qk_rope_head_dim", std::to_string(c.rope_head_dim)},
      {"q_lora_rank", std::to_string(c.q_lora_rank)},
      {"o_groups", std::to_string(c.o_groups)},
      {"o_lora_rank", std::to_string(c.o_lora_rank)},
      {"sliding_window", std::to_string(c.sliding_window)},
  };
  if (ratios_say_types(c)) {
    keys.emplace_back("compress_ratios", int_list(c.compress_ratios));
  } else {
    keys.emplace_back("layer_types", layer_types_json(c));
    keys.emplace_back("compress_rates", compress_rates_json(c));
  }
  const std::string yarn = "{\"type\": \"yarn\", \"factor\": " + real(c.yarn.factor) + ", \"beta_fast\": " + real(c.yarn.beta_fast) +
                           ", \"beta_slow\": " + real(c.yarn.beta_slow) +
                           ", \"original_max_position_embeddings\": " + std::to_string(c.yarn.original_max_position_embeddings) + "}";
  const std::vector<std::pair<std::string, std::string>> rest = {
      {"rope_theta", real(c.rope_theta)},
      {"compress_rope_theta", real(c.compress_rope_theta)},
      {"rope_scaling", yarn},
      {"max_position_embeddings", std::to_string(c.max_position_embeddings)},
      {"index_n_heads", std::to_string(c.index_n_heads)},
      {"index_head_dim", std::to_string(c.index_head_dim)},
      {"index_topk", std::to_string(c.index_topk)},
      {"n_routed_experts", std::to_string(c.n_routed_experts)},
      {"num_experts_per_tok", std::to_string(c.num_experts_per_tok)},
      {"n_shared_experts", std::to_string(c.n_shared_experts)},
      {"moe_intermediate_size", std::to_string(c.moe_intermediate_size)},
      {"scoring_func", json_string(scoring_func_name(c.scoring_func))},
      {"topk_method", json_string("noaux_tc")},
      {"norm_topk_prob", c.norm_topk_prob ? "true" : "false"},
      {"routed_scaling_factor", real(c.routed_scaling_factor)},
  };
  keys.insert(keys.end(), rest.begin(), rest.end());
  if (const int64_t n = hash_prefix(c); n >= 0) {
    keys.emplace_back("num_hash_layers", std::to_string(n));
  } else {
    keys.emplace_back("mlp_layer_types", mlp_types_json(c));
  }
  const std::vector<std::pair<std::string, std::string>> tail = {
      {"swiglu_limit", real(c.swiglu_limit)},
      {"hc_mult", std::to_string(c.hc_mult)},
      {"hc_sinkhorn_iters", std::to_string(c.hc_sinkhorn_iters)},
      {"hc_eps", real(c.hc_eps)},
      {"rms_norm_eps", real(c.rms_norm_eps)},
      {"num_nextn_predict_layers", std::to_string(c.num_nextn_predict_layers)},
      {"tie_word_embeddings", c.tie_word_embeddings ? "true" : "false"},
  };
  keys.insert(keys.end(), tail.begin(), tail.end());
  if (format.fp4_experts) keys.emplace_back("expert_dtype", json_string("fp4"));
  if (format.fp8_linears) {
    keys.emplace_back("quantization_config",
                      "{\"quant_method\": \"fp8\", \"fmt\": \"e4m3\", \"scale_fmt\": \"ue8m0\", "
                      "\"weight_block_size\": [" +
                          std::to_string(kFp8Block) + ", " + std::to_string(kFp8Block) + "], \"activation_scheme\": \"dynamic\"}");
  }
  std::string out = "{\n";
  for (size_t i = 0; i < keys.size(); ++i) {
    out += "  " + json_string(keys[i].first) + ": " + keys[i].second + (i + 1 < keys.size() ? ",\n" : "\n");
  }
  return out + "}\n";
}

void write_checkpoint(const ModelConfig& config, const ModelWeights& weights, const WeightFormat& format, const std::string& dir,
                      const WriteOptions& options) {
  const ExpertRange& held = weights.experts();
  TORCH_CHECK(held.first == 0 && held.last == config.n_routed_experts, "write_checkpoint: the weights hold experts [", held.first, ", ",
              held.last, ") of ", config.n_routed_experts, "; a checkpoint needs all of them");
  auto is_packed = [&](const WeightSpec& spec) { return spec.expert >= 0 && weights.get(spec.name).scalar_type() == at::kByte; };
  const DenseFn dense = [&](const WeightSpec& spec) -> at::Tensor {
    const at::Tensor& t = weights.get(spec.name);
    if (is_packed(spec)) return dequant_fp4(t, weights.get(scale_name(spec.name)), at::kFloat);
    return t;
  };
  const PackedFn packed = [&](const WeightSpec& spec) -> std::optional<std::pair<at::Tensor, at::Tensor>> {
    if (!is_packed(spec)) return std::nullopt;
    return std::make_pair(weights.get(spec.name), weights.get(scale_name(spec.name)));
  };
  write_tensors(config, format, dir, options, dense, packed);
}

void init_model(const InitModelOptions& options) {
  TORCH_CHECK(!options.output_dir.empty(), "init_model: output directory is empty");
  const ModelConfig config = load_model_config(options.config_path);
  const WeightFormat format{options.dense_dtype, options.fp8_linears, options.experts_fp4};
  const DenseFn dense = [&](const WeightSpec& spec) { return random_tensor(config, spec, options.seed); };
  const PackedFn none = [](const WeightSpec&) -> std::optional<std::pair<at::Tensor, at::Tensor>> { return std::nullopt; };
  write_tensors(config, format, options.output_dir, options.write, dense, none);
}

}  // namespace deepinfer::model
