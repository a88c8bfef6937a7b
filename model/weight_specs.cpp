#include "model/weight_specs.h"

#include <simdjson.h>

#include <stdexcept>

namespace deepinfer::model {
namespace {

constexpr int64_t kFp8Block = 128;  // = quant.h kFp8Block (this file stays torch-free)
constexpr int64_t kFp4Block = 32;   // = quant.h kFp4Block

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

class SpecList {
 public:
  explicit SpecList(const WeightFormat& format) : format_(format) {}

  void dense(std::string name, std::vector<int64_t> shape) { add(std::move(name), shape, format_.dense_dtype, WeightKind::kDense, shape); }
  void f32(std::string name, std::vector<int64_t> shape) { add(std::move(name), shape, io::DType::kF32, WeightKind::kFloat32, shape); }
  void i64(std::string name, std::vector<int64_t> shape) { add(std::move(name), shape, io::DType::kI64, WeightKind::kInt64, shape); }

  // A linear that the FP8 format stores as e4m3 + 128x128 e8m0 scales.
  void linear(const std::string& name, int64_t out, int64_t in) {
    if (!format_.fp8_linears) return dense(name, {out, in});
    add(name, {out, in}, io::DType::kF8E4M3, WeightKind::kFp8Weight, {out, in});
    add(scale_name(name), {ceil_div(out, kFp8Block), ceil_div(in, kFp8Block)}, io::DType::kF8E8M0, WeightKind::kFp8Scale,
        {ceil_div(out, kFp8Block), ceil_div(in, kFp8Block)});
  }

  void expert(const std::string& name, int64_t out, int64_t in, int64_t expert_id) {
    const size_t first = specs_.size();
    if (!format_.fp4_experts) {
      dense(name, {out, in});
    } else {
      if (in % 2 != 0) throw std::invalid_argument("FP4 expert tensor " + name + " needs an even input width, got " + std::to_string(in));
      add(name, {out, in / 2}, io::DType::kI8, WeightKind::kFp4Weight, {out, in});
      add(scale_name(name), {out, ceil_div(in, kFp4Block)}, io::DType::kF8E8M0, WeightKind::kFp4Scale, {out, ceil_div(in, kFp4Block)});
    }
    for (size_t i = first; i < specs_.size(); ++i) specs_[i].expert = expert_id;
  }

  std::vector<WeightSpec> take() { return std::move(specs_); }

 private:
  void add(std::string name, std::vector<int64_t> shape, io::DType dtype, WeightKind kind, std::vector<int64_t> logical) {
    specs_.push_back(WeightSpec{std::move(name), std::move(shape), dtype, kind, std::move(logical), -1});
  }

  WeightFormat format_;
  std::vector<WeightSpec> specs_;
};

void compressor_specs(SpecList& specs, const std::string& prefix, int64_t overlap, int64_t ratio, int64_t dim, int64_t hidden) {
  specs.dense(prefix + "wkv.weight", {overlap * dim, hidden});
  specs.dense(prefix + "wgate.weight", {overlap * dim, hidden});
  specs.f32(prefix + "ape", {ratio, overlap * dim});
  specs.dense(prefix + "norm.weight", {dim});
}

}  // namespace

WeightFormat v4_flash_format() { return WeightFormat{io::DType::kBF16, /*fp8_linears=*/true, /*fp4_experts=*/true}; }

WeightFormat announced_format(std::string_view config_json, io::DType dense_dtype) {
  WeightFormat format;
  format.dense_dtype = dense_dtype;
  simdjson::dom::parser parser;
  const simdjson::dom::element root = parser.parse(simdjson::padded_string(config_json));
  std::string_view text;
  format.fp4_experts = root["expert_dtype"].get(text) == simdjson::SUCCESS && text == "fp4";
  format.fp8_linears = root["quantization_config"]["quant_method"].get(text) == simdjson::SUCCESS && text == "fp8";
  return format;
}

std::string layer_prefix(int64_t layer) { return "layers." + std::to_string(layer) + "."; }

std::string expert_prefix(int64_t layer, int64_t expert) { return layer_prefix(layer) + "ffn.experts." + std::to_string(expert) + "."; }

std::string scale_name(const std::string& weight_name) {
  constexpr std::string_view kSuffix = ".weight";
  if (weight_name.size() < kSuffix.size() || weight_name.compare(weight_name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
    throw std::invalid_argument("scale_name: '" + weight_name + "' does not end in .weight");
  }
  return weight_name.substr(0, weight_name.size() - kSuffix.size()) + ".scale";
}

std::vector<WeightSpec> weight_specs(const ModelConfig& c, const WeightFormat& format, std::optional<ExpertRange> experts) {
  if (format.dense_dtype != io::DType::kF32 && format.dense_dtype != io::DType::kBF16) {
    throw std::invalid_argument("weight_specs: dense dtype must be F32 or BF16, got " + std::string(io::dtype_name(format.dense_dtype)));
  }
  const ExpertRange range = experts.value_or(ExpertRange{0, c.n_routed_experts});
  if (range.first < 0 || range.first > range.last || range.last > c.n_routed_experts) {
    throw std::invalid_argument("weight_specs: expert range [" + std::to_string(range.first) + ", " + std::to_string(range.last) +
                                ") is not inside [0, " + std::to_string(c.n_routed_experts) + ")");
  }
  const int64_t D = c.hidden_size;
  const int64_t hd = c.num_heads * c.head_dim;
  SpecList specs(format);
  specs.dense("embed.weight", {c.vocab_size, D});
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = layer_prefix(l);
    for (const char* site : {"attn", "ffn"}) {
      specs.f32(p + "hc_" + site + "_fn", {c.hc_mix_dim(), c.hc_dim()});
      specs.f32(p + "hc_" + site + "_base", {c.hc_mix_dim()});
      specs.f32(p + "hc_" + site + "_scale", {3});
    }
    specs.dense(p + "attn_norm.weight", {D});
    specs.dense(p + "ffn_norm.weight", {D});
    specs.linear(p + "attn.wq_a.weight", c.q_lora_rank, D);
    specs.dense(p + "attn.q_norm.weight", {c.q_lora_rank});
    specs.linear(p + "attn.wq_b.weight", hd, c.q_lora_rank);
    specs.linear(p + "attn.wkv.weight", c.head_dim, D);
    specs.dense(p + "attn.kv_norm.weight", {c.head_dim});
    specs.linear(p + "attn.wo_a.weight", c.o_groups * c.o_lora_rank, hd / c.o_groups);
    specs.linear(p + "attn.wo_b.weight", D, c.o_groups * c.o_lora_rank);
    specs.f32(p + "attn.attn_sink", {c.num_heads});
    const int64_t ratio = c.compress_ratio(l);
    if (ratio > 0) compressor_specs(specs, p + "attn.compressor.", c.compress_overlap(l), ratio, c.head_dim, D);
    if (c.layer_type(l) == LayerType::kCsa) {
      specs.linear(p + "attn.indexer.wq_b.weight", c.index_n_heads * c.index_head_dim, c.q_lora_rank);
      specs.dense(p + "attn.indexer.weights_proj.weight", {c.index_n_heads, D});
      compressor_specs(specs, p + "attn.indexer.compressor.", 2, ratio, c.index_head_dim, D);
    }
    specs.dense(p + "ffn.gate.weight", {c.n_routed_experts, D});
    if (c.is_hash_layer(l)) {
      specs.i64(p + "ffn.gate.tid2eid", {c.vocab_size, c.num_experts_per_tok});
    } else {
      specs.f32(p + "ffn.gate.bias", {c.n_routed_experts});
    }
    for (int64_t e = range.first; e < range.last; ++e) {
      const std::string ep = expert_prefix(l, e);
      specs.expert(ep + "w1.weight", c.moe_intermediate_size, D, e);
      specs.expert(ep + "w2.weight", D, c.moe_intermediate_size, e);
      specs.expert(ep + "w3.weight", c.moe_intermediate_size, D, e);
    }
    if (c.n_shared_experts > 0) {
      const int64_t inter = c.n_shared_experts * c.moe_intermediate_size;
      specs.linear(p + "ffn.shared_experts.w1.weight", inter, D);
      specs.linear(p + "ffn.shared_experts.w2.weight", D, inter);
      specs.linear(p + "ffn.shared_experts.w3.weight", inter, D);
    }
  }
  specs.dense("norm.weight", {D});
  specs.f32("hc_head_fn", {c.hc_mult, c.hc_dim()});
  specs.f32("hc_head_base", {c.hc_mult});
  specs.f32("hc_head_scale", {1});
  specs.dense("head.weight", {c.vocab_size, D});
  return specs.take();
}

}  // namespace deepinfer::model
