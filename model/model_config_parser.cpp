// ModelConfig from config.json text (simdjson DOM): both key spellings, errors naming the key.
#include "model/model_config.h"

#include <simdjson.h>

#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace deepinfer::model {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

std::string describe(element value) {
  std::string text = simdjson::to_string(value);
  if (text.size() > 80) {
    text.resize(77);
    text += "...";
  }
  return text;
}

[[noreturn]] void fail(const std::string& origin, std::string_view key, const std::string& problem) {
  throw std::invalid_argument(origin + ": config key '" + std::string(key) + "': " + problem);
}

// A JSON object with typed, error-reporting accessors. `path` is the key path for messages.
class JsonObject {
 public:
  JsonObject(element value, std::string origin, std::string path) : origin_(std::move(origin)), path_(std::move(path)) {
    simdjson::dom::object object;
    if (value.get_object().get(object)) fail(origin_, path_.empty() ? "<root>" : path_, "expected an object, got " + describe(value));
    for (auto field : object) {
      if (!fields_.emplace(std::string(field.key), field.value).second) fail(origin_, key_path(field.key), "appears twice");
    }
  }

  bool has(std::string_view key) const {
    auto it = fields_.find(std::string(key));
    return it != fields_.end() && it->second.type() != element_type::NULL_VALUE;
  }
  element raw(std::string_view key) const { return fields_.at(std::string(key)); }
  std::string key_path(std::string_view key) const { return path_.empty() ? std::string(key) : path_ + "." + std::string(key); }

  int64_t integer(std::string_view key) const {
    if (!has(key)) fail(origin_, key_path(key), "missing (required)");
    return as_integer(key, raw(key));
  }
  int64_t integer(std::string_view key, int64_t fallback) const { return has(key) ? as_integer(key, raw(key)) : fallback; }
  std::optional<int64_t> optional_integer(std::string_view key) const {
    if (!has(key)) return std::nullopt;
    return as_integer(key, raw(key));
  }
  double number(std::string_view key, double fallback) const {
    if (!has(key)) return fallback;
    return as_number(key, raw(key));
  }
  std::optional<double> optional_number(std::string_view key) const {
    if (!has(key)) return std::nullopt;
    return as_number(key, raw(key));
  }
  bool boolean(std::string_view key, bool fallback) const {
    if (!has(key)) return fallback;
    bool value = false;
    if (raw(key).get_bool().get(value)) fail(origin_, key_path(key), "expected true/false, got " + describe(raw(key)));
    return value;
  }
  std::optional<std::string> optional_string(std::string_view key) const {
    if (!has(key)) return std::nullopt;
    std::string_view value;
    if (raw(key).get_string().get(value)) fail(origin_, key_path(key), "expected a string, got " + describe(raw(key)));
    return std::string(value);
  }
  std::optional<JsonObject> optional_object(std::string_view key) const {
    if (!has(key)) return std::nullopt;
    return JsonObject(raw(key), origin_, key_path(key));
  }
  std::optional<std::vector<int64_t>> optional_integer_list(std::string_view key) const {
    if (!has(key)) return std::nullopt;
    std::vector<int64_t> out;
    for (element item : array(key)) out.push_back(as_integer(key, item));
    return out;
  }
  std::optional<std::vector<std::string>> optional_string_list(std::string_view key) const {
    if (!has(key)) return std::nullopt;
    std::vector<std::string> out;
    for (element item : array(key)) {
      std::string_view value;
      if (item.get_string().get(value)) fail(origin_, key_path(key), "expected a list of strings, got element " + describe(item));
      out.emplace_back(value);
    }
    return out;
  }
  const std::string& origin() const { return origin_; }

 private:
  simdjson::dom::array array(std::string_view key) const {
    simdjson::dom::array values;
    if (raw(key).get_array().get(values)) fail(origin_, key_path(key), "expected a list, got " + describe(raw(key)));
    return values;
  }
  int64_t as_integer(std::string_view key, element value) const {
    int64_t out = 0;
    if (!value.get_int64().get(out)) return out;
    double real = 0;
    if (!value.get_double().get(real) && std::isfinite(real) && std::floor(real) == real && std::fabs(real) < 9e15) {
      return static_cast<int64_t>(real);
    }
    fail(origin_, key_path(key), "expected an integer, got " + describe(value));
  }
  double as_number(std::string_view key, element value) const {
    double out = 0;
    if (value.get_double().get(out)) fail(origin_, key_path(key), "expected a number, got " + describe(value));
    return out;
  }

  std::string origin_;
  std::string path_;
  std::map<std::string, element> fields_;
};

std::string join(const std::vector<int64_t>& values) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < values.size(); ++i) out << (i ? "," : "") << values[i];
  out << "]";
  return out.str();
}

// Layer types and ratios from `compress_ratios` (official) and/or `layer_types` + `compress_rates` (HF).
void parse_layers(const JsonObject& json, ModelConfig& config) {
  const std::string& origin = json.origin();
  std::optional<std::vector<LayerType>> official_types;
  std::optional<std::vector<int64_t>> official_ratios = json.optional_integer_list("compress_ratios");
  if (official_ratios) {
    const int64_t n = config.num_layers;
    const int64_t with_mtp = n + config.num_nextn_predict_layers;
    const auto size = static_cast<int64_t>(official_ratios->size());
    if (size != n && size != with_mtp) {
      fail(origin, "compress_ratios",
           "has " + std::to_string(size) + " entries, expected num_hidden_layers (" + std::to_string(n) +
               ") or num_hidden_layers + num_nextn_predict_layers (" + std::to_string(with_mtp) + ")");
    }
    official_ratios->resize(n);
    official_types.emplace();
    for (int64_t ratio : *official_ratios) {
      if (ratio < 0) fail(origin, "compress_ratios", "negative ratio " + std::to_string(ratio) + " in " + join(*official_ratios));
      // Official code ties the overlap compressor + indexer to ratio 4 (deepseek-v4.md §7 Q6).
      official_types->push_back(ratio == 0 ? LayerType::kSliding : ratio == 4 ? LayerType::kCsa : LayerType::kHca);
    }
  }

  std::optional<std::vector<std::string>> hf_names = json.optional_string_list("layer_types");
  if (hf_names) {
    int64_t csa_rate = json.integer("compress_rate_csa", 4);
    int64_t hca_rate = json.integer("compress_rate_hca", 128);
    if (auto rates = json.optional_object("compress_rates")) {
      csa_rate = rates->integer(layer_type_name(LayerType::kCsa), csa_rate);
      hca_rate = rates->integer(layer_type_name(LayerType::kHca), hca_rate);
    }
    if (static_cast<int64_t>(hf_names->size()) != config.num_layers) {
      fail(origin, "layer_types",
           "has " + std::to_string(hf_names->size()) + " entries, expected num_hidden_layers (" + std::to_string(config.num_layers) + ")");
    }
    std::vector<LayerType> types;
    std::vector<int64_t> ratios;
    for (const std::string& name : *hf_names) {
      if (name == layer_type_name(LayerType::kSliding)) {
        types.push_back(LayerType::kSliding);
        ratios.push_back(0);
      } else if (name == layer_type_name(LayerType::kCsa)) {
        types.push_back(LayerType::kCsa);
        ratios.push_back(csa_rate);
      } else if (name == layer_type_name(LayerType::kHca)) {
        types.push_back(LayerType::kHca);
        ratios.push_back(hca_rate);
      } else {
        fail(origin, "layer_types",
             "unknown layer type '" + name + "' (expected sliding_attention, " +
                 "compressed_sparse_attention or heavily_compressed_attention)");
      }
    }
    if (official_ratios && (*official_ratios != ratios || *official_types != types)) {
      fail(origin, "layer_types", "disagrees with compress_ratios " + join(*official_ratios) + " (layer_types gives " + join(ratios) + ")");
    }
    config.layer_types = std::move(types);
    config.compress_ratios = std::move(ratios);
  } else if (official_ratios) {
    config.layer_types = std::move(*official_types);
    config.compress_ratios = std::move(*official_ratios);
  } else {
    fail(origin, "compress_ratios", "missing: the config needs compress_ratios (official) or layer_types (HF)");
  }
}

void parse_mlp(const JsonObject& json, ModelConfig& config) {
  const std::string& origin = json.origin();
  std::optional<int64_t> num_hash = json.optional_integer("num_hash_layers");
  if (num_hash && (*num_hash < 0 || *num_hash > config.num_layers)) {
    fail(origin, "num_hash_layers",
         "must be in [0, num_hidden_layers=" + std::to_string(config.num_layers) + "], got " + std::to_string(*num_hash));
  }
  if (auto names = json.optional_string_list("mlp_layer_types")) {
    if (static_cast<int64_t>(names->size()) != config.num_layers) {
      fail(origin, "mlp_layer_types",
           "has " + std::to_string(names->size()) + " entries, expected num_hidden_layers (" + std::to_string(config.num_layers) + ")");
    }
    config.mlp_types.clear();
    for (const std::string& name : *names) {
      if (name == "hash_moe") {
        config.mlp_types.push_back(MlpType::kHashMoe);
      } else if (name == "moe") {
        config.mlp_types.push_back(MlpType::kMoe);
      } else {
        fail(origin, "mlp_layer_types", "unknown mlp type '" + name + "' (expected hash_moe or moe)");
      }
    }
    if (num_hash) {
      for (int64_t l = 0; l < config.num_layers; ++l) {
        if ((l < *num_hash) != (config.mlp_types[l] == MlpType::kHashMoe)) {
          fail(origin, "mlp_layer_types", "disagrees with num_hash_layers=" + std::to_string(*num_hash) + " at layer " + std::to_string(l));
        }
      }
    }
  } else {
    const int64_t n = num_hash.value_or(0);
    config.mlp_types.assign(config.num_layers, MlpType::kMoe);
    for (int64_t l = 0; l < n; ++l) config.mlp_types[l] = MlpType::kHashMoe;
  }
}

void parse_yarn(const JsonObject& rope, YarnScaling& yarn) {
  std::optional<std::string> type = rope.optional_string("rope_type");
  if (!type) type = rope.optional_string("type");
  if (type && *type != "yarn")
    fail(rope.origin(), rope.key_path("rope_type"), "only 'yarn' is supported for the compress rope, got '" + *type + "'");
  yarn.factor = rope.number("factor", yarn.factor);
  yarn.beta_fast = rope.number("beta_fast", yarn.beta_fast);
  yarn.beta_slow = rope.number("beta_slow", yarn.beta_slow);
  yarn.original_max_position_embeddings = rope.integer("original_max_position_embeddings", yarn.original_max_position_embeddings);
  if (auto attention_factor = rope.optional_number("attention_factor"); attention_factor && *attention_factor != 1.0) {
    fail(rope.origin(), rope.key_path("attention_factor"),
         "V4 applies no YaRN attention scaling; expected 1.0, got " + std::to_string(*attention_factor));
  }
}

// rope_theta / compress_rope_theta / rope_scaling (official) or rope_parameters {main, compress} (HF).
void parse_rope(const JsonObject& json, ModelConfig& config, std::optional<double>& partial_rotary_factor) {
  config.rope_theta = json.number("rope_theta", config.rope_theta);
  config.compress_rope_theta = json.number("compress_rope_theta", config.compress_rope_theta);
  if (auto scaling = json.optional_object("rope_scaling")) parse_yarn(*scaling, config.yarn);
  if (auto params = json.optional_object("rope_parameters")) {
    if (!params->has("main") && !params->has("compress")) {
      fail(json.origin(), "rope_parameters", "expected the keys 'main' and 'compress'");
    }
    if (auto main = params->optional_object("main")) {
      std::optional<std::string> type = main->optional_string("rope_type");
      if (type && *type != "default")
        fail(json.origin(), main->key_path("rope_type"), "the main rope must be 'default', got '" + *type + "'");
      config.rope_theta = main->number("rope_theta", config.rope_theta);
      if (auto factor = main->optional_number("partial_rotary_factor")) partial_rotary_factor = factor;
    }
    if (auto compress = params->optional_object("compress")) {
      parse_yarn(*compress, config.yarn);
      config.compress_rope_theta = compress->number("rope_theta", config.compress_rope_theta);
      if (auto factor = compress->optional_number("partial_rotary_factor")) partial_rotary_factor = factor;
    }
  }
}

}  // namespace

ModelConfig parse_model_config(std::string_view text, const std::string& origin) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(text.data(), text.size());
  element root;
  if (auto error = parser.parse(padded).get(root)) {
    throw std::invalid_argument(origin + ": config is not valid JSON: " + simdjson::error_message(error));
  }
  JsonObject json(root, origin, "");
  if (auto type = json.optional_string("model_type"); type && *type != "deepseek_v4") {
    fail(origin, "model_type", "expected 'deepseek_v4', got '" + *type + "'");
  }
  ModelConfig config;
  config.vocab_size = json.integer("vocab_size");
  config.bos_token_id = json.integer("bos_token_id", config.bos_token_id);
  config.eos_token_id = json.integer("eos_token_id", config.eos_token_id);
  config.hidden_size = json.integer("hidden_size");
  config.num_layers = json.integer("num_hidden_layers");
  config.num_heads = json.integer("num_attention_heads");
  config.num_kv_heads = json.integer("num_key_value_heads", 1);
  config.head_dim = json.integer("head_dim");
  config.q_lora_rank = json.integer("q_lora_rank");
  config.o_groups = json.integer("o_groups");
  config.o_lora_rank = json.integer("o_lora_rank");
  config.sliding_window = json.integer("sliding_window", config.sliding_window);
  config.num_nextn_predict_layers = json.integer("num_nextn_predict_layers", 0);
  config.max_position_embeddings = json.integer("max_position_embeddings", config.max_position_embeddings);

  std::optional<double> partial_rotary_factor = json.optional_number("partial_rotary_factor");
  parse_rope(json, config, partial_rotary_factor);
  std::optional<int64_t> rope_dim = json.optional_integer("qk_rope_head_dim");
  if (partial_rotary_factor) {
    const double derived = *partial_rotary_factor * static_cast<double>(config.head_dim);
    if (std::floor(derived) != derived) {
      fail(origin, "partial_rotary_factor",
           "times head_dim=" + std::to_string(config.head_dim) + " is not an integer (" + std::to_string(derived) + ")");
    }
    if (rope_dim && *rope_dim != static_cast<int64_t>(derived)) {
      fail(origin, "qk_rope_head_dim",
           std::to_string(*rope_dim) +
               " disagrees with partial_rotary_factor * head_dim = " + std::to_string(static_cast<int64_t>(derived)));
    }
    rope_dim = static_cast<int64_t>(derived);
  }
  if (!rope_dim) fail(origin, "qk_rope_head_dim", "missing: the config needs qk_rope_head_dim or partial_rotary_factor");
  config.rope_head_dim = *rope_dim;

  parse_layers(json, config);
  parse_mlp(json, config);

  config.index_n_heads = json.integer("index_n_heads", 0);
  config.index_head_dim = json.integer("index_head_dim", 0);
  config.index_topk = json.integer("index_topk", 0);
  config.n_routed_experts = json.integer("n_routed_experts");
  config.num_experts_per_tok = json.integer("num_experts_per_tok");
  config.n_shared_experts = json.integer("n_shared_experts", 1);
  config.moe_intermediate_size = json.integer("moe_intermediate_size");
  if (auto func = json.optional_string("scoring_func")) {
    if (*func == "sqrtsoftplus") {
      config.scoring_func = ScoringFunc::kSqrtSoftplus;
    } else if (*func == "sigmoid") {
      config.scoring_func = ScoringFunc::kSigmoid;
    } else if (*func == "softmax") {
      config.scoring_func = ScoringFunc::kSoftmax;
    } else {
      fail(origin, "scoring_func", "unknown '" + *func + "' (expected sqrtsoftplus, sigmoid or softmax)");
    }
  }
  if (auto method = json.optional_string("topk_method"); method && *method != "noaux_tc") {
    fail(origin, "topk_method", "only 'noaux_tc' is supported, got '" + *method + "'");
  }
  config.norm_topk_prob = json.boolean("norm_topk_prob", true);
  config.routed_scaling_factor = json.number("routed_scaling_factor", 1.0);
  config.swiglu_limit = json.number("swiglu_limit", 0.0);
  config.hc_mult = json.integer("hc_mult", config.hc_mult);
  config.hc_sinkhorn_iters = json.integer("hc_sinkhorn_iters", config.hc_sinkhorn_iters);
  config.hc_eps = json.number("hc_eps", config.hc_eps);
  config.rms_norm_eps = json.number("rms_norm_eps", config.rms_norm_eps);
  config.tie_word_embeddings = json.boolean("tie_word_embeddings", false);
  if (config.tie_word_embeddings) fail(origin, "tie_word_embeddings", "V4 has an untied head; expected false, got true");

  try {
    config.validate();
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument(origin + ": " + error.what());
  }
  return config;
}

ModelConfig load_model_config(const std::string& path) {
  std::string file = path;
  {
    std::ifstream probe(file + "/config.json");
    if (probe.good()) file += "/config.json";
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::invalid_argument(file + ": cannot open model config");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_model_config(text.str(), file);
}

}  // namespace deepinfer::model
