#include "model/checkpoint_loader.h"

#include <algorithm>
#include <cstring>
#include <regex>
#include <set>

#include "model/quant.h"

namespace deepinfer::model {
namespace {

constexpr size_t kIgnoredExamples = 8;

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// The tensors of one checkpoint, looked up by official name in its spelling.
class TensorSource final {
 public:
  TensorSource(const io::Checkpoint& checkpoint, NameSpelling spelling) : checkpoint_(checkpoint), spelling_(spelling) {}

  // The stored view of an official name, or nullptr; throws when two spellings are both present.
  const io::TensorView* find(const std::string& official, std::string* stored_name = nullptr) const {
    const io::TensorView* found = nullptr;
    std::string found_name;
    for (const std::string& name : spelled_names(official, spelling_)) {
      const io::TensorView* view = checkpoint_.find(name);
      if (view == nullptr) continue;
      TORCH_CHECK(found == nullptr, "checkpoint ", checkpoint_.dir(), ": tensor '", official, "' is stored twice, as '", found_name,
                  "' and as '", name, "'");
      found = view;
      found_name = name;
    }
    if (stored_name) *stored_name = found_name;
    return found;
  }

  // The stored view of a spec, checked for presence, dtype and shape.
  const io::TensorView& get(const WeightSpec& spec) {
    std::string name;
    const io::TensorView* view = find(spec.name, &name);
    if (view == nullptr) {
      std::string tried;
      for (const std::string& n : spelled_names(spec.name, spelling_)) tried += (tried.empty() ? "'" : ", '") + n + "'";
      TORCH_CHECK(false, "checkpoint ", checkpoint_.dir(), ": missing tensor '", spec.name, "' (looked for ", tried, ")");
    }
    const std::string where =
        "checkpoint " + checkpoint_.dir() + ": tensor '" + spec.name + "' (stored as '" + name + "' in " + checkpoint_.file_of(name) + ")";
    const bool packed_fp4 = spec.kind == WeightKind::kFp4Weight && (view->dtype == io::DType::kI8 || view->dtype == io::DType::kU8);
    TORCH_CHECK(view->dtype == spec.dtype || packed_fp4, where, ": expected dtype ", std::string(io::dtype_name(spec.dtype)), ", got ",
                std::string(io::dtype_name(view->dtype)));
    TORCH_CHECK(view->shape == spec.shape, where, ": expected shape ", shape_text(spec.shape), ", got ", shape_text(view->shape));
    used_.insert(name);
    return *view;
  }

  const std::set<std::string>& used() const { return used_; }

 private:
  const io::Checkpoint& checkpoint_;
  NameSpelling spelling_;
  std::set<std::string> used_;
};

// A CPU tensor holding a copy of the view's bytes (byte dtypes become uint8).
at::Tensor read_view(const io::TensorView& view) {
  const bool bytes = io::dtype_size(view.dtype) == 1;
  at::Tensor t = at::empty(view.shape, at::TensorOptions().dtype(bytes ? at::kByte : torch_dtype(view.dtype)));
  TORCH_INTERNAL_ASSERT(static_cast<size_t>(t.numel() * t.element_size()) == view.nbytes, "tensor ", view.name, ": ", view.nbytes,
                        " bytes for shape ", shape_text(view.shape));
  if (view.nbytes) std::memcpy(t.data_ptr(), view.data, view.nbytes);
  return t;
}

bool is_routed_expert(const std::string& name) {
  static const std::regex pattern(R"((^|\.)layers\.\d+\.ffn\.experts\.\d+\.)");
  return std::regex_search(name, pattern);
}

}  // namespace

std::vector<std::string> spelled_names(const std::string& official, NameSpelling spelling) {
  if (spelling == NameSpelling::kOfficial) return {official};
  if (official == "embed.weight") return {"model.embed_tokens.weight"};
  if (official == "head.weight") return {"head.weight", "lm_head.weight"};
  if (official == "hc_head_fn") return {"model.hc_head.hc_fn"};
  if (official == "hc_head_base") return {"model.hc_head.hc_base"};
  if (official == "hc_head_scale") return {"model.hc_head.hc_scale"};
  static const std::string kKvNorm = ".attn.kv_norm.weight";
  if (starts_with(official, "layers.") && official.size() > kKvNorm.size() &&
      official.compare(official.size() - kKvNorm.size(), kKvNorm.size(), kKvNorm) == 0) {
    // save_pretrained (transformers 5.17) reverts kv_norm to "attn.norm" (deepseek-v4.md §3).
    const std::string layer = official.substr(0, official.size() - kKvNorm.size());
    return {"model." + layer + ".attn.norm.weight", "model." + official};
  }
  return {"model." + official};
}

NameSpelling detect_spelling(const io::Checkpoint& checkpoint) {
  if (checkpoint.find("embed.weight")) return NameSpelling::kOfficial;
  if (checkpoint.find("model.embed_tokens.weight")) return NameSpelling::kSavePretrained;
  const std::vector<std::string> names = checkpoint.names();
  std::string first;
  for (size_t i = 0; i < names.size() && i < 5; ++i) first += (i ? ", " : "") + names[i];
  TORCH_CHECK(false, "checkpoint ", checkpoint.dir(), ": missing tensor 'embed.weight' (neither 'embed.weight', the ",
              "official name, nor 'model.embed_tokens.weight', the save_pretrained name, is present; first names: ", first, ")");
  return NameSpelling::kOfficial;  // unreachable
}

WeightFormat detect_format(const io::Checkpoint& checkpoint, const ModelConfig& config, NameSpelling spelling, const ExpertRange& experts) {
  TensorSource source(checkpoint, spelling);
  WeightFormat format;
  std::string name;
  const io::TensorView* embed = source.find("embed.weight", &name);
  TORCH_CHECK(embed != nullptr, "checkpoint ", checkpoint.dir(), ": missing tensor 'embed.weight'");
  TORCH_CHECK(embed->dtype == io::DType::kF32 || embed->dtype == io::DType::kBF16, "checkpoint ", checkpoint.dir(),
              ": tensor 'embed.weight' (stored as '", name, "' in ", checkpoint.file_of(name), "): dense tensors must be F32 or BF16, got ",
              std::string(io::dtype_name(embed->dtype)));
  format.dense_dtype = embed->dtype;
  const io::TensorView* wq_a = source.find(layer_prefix(0) + "attn.wq_a.weight");
  format.fp8_linears = wq_a != nullptr && wq_a->dtype == io::DType::kF8E4M3;
  if (experts.size() > 0 && config.num_layers > 0) {
    const io::TensorView* w1 = source.find(expert_prefix(0, experts.first) + "w1.weight");
    format.fp4_experts = w1 != nullptr && (w1->dtype == io::DType::kI8 || w1->dtype == io::DType::kU8);
  }
  return format;
}

ModelWeights load_checkpoint(const std::string& dir, const LoadOptions& options, LoadReport* report) {
  const ModelConfig config = load_model_config(dir);
  const io::Checkpoint checkpoint = io::Checkpoint::open(dir);
  return load_checkpoint(checkpoint, config, options, report);
}

ModelWeights load_checkpoint(const io::Checkpoint& checkpoint, const ModelConfig& config, const LoadOptions& options, LoadReport* report) {
  const ExpertRange range = options.experts.value_or(ExpertRange{0, config.n_routed_experts});
  const NameSpelling spelling = detect_spelling(checkpoint);
  const WeightFormat format = detect_format(checkpoint, config, spelling, range);
  ModelWeights weights(ModelWeights::Options{config, options.dtype, options.device, range});
  TensorSource source(checkpoint, spelling);
  const std::vector<WeightSpec> specs = weight_specs(config, format, range);
  for (size_t i = 0; i < specs.size(); ++i) {
    const WeightSpec& spec = specs[i];
    switch (spec.kind) {
      case WeightKind::kFp8Scale:
      case WeightKind::kFp4Scale: break;  // read with their weight
      case WeightKind::kDense: weights.set(spec.name, read_view(source.get(spec)).to(options.device).to(options.dtype)); break;
      case WeightKind::kFloat32: weights.set(spec.name, read_view(source.get(spec))); break;
      case WeightKind::kInt64: {
        at::Tensor ids = read_view(source.get(spec));
        if (ids.numel() > 0) {
          const int64_t low = ids.min().item<int64_t>(), high = ids.max().item<int64_t>();
          TORCH_CHECK(low >= 0 && high < config.n_routed_experts, "checkpoint ", checkpoint.dir(), ": tensor '", spec.name,
                      "' holds expert ids in [", low, ", ", high, "], outside [0, ", config.n_routed_experts, ")");
        }
        weights.set(spec.name, ids);
        break;
      }
      case WeightKind::kFp8Weight:
      case WeightKind::kFp4Weight: {
        TORCH_INTERNAL_ASSERT(i + 1 < specs.size() && specs[i + 1].name == scale_name(spec.name), "weight_specs: ", spec.name,
                              " is not followed by its scale");
        const at::Tensor codes = read_view(source.get(spec)).to(options.device);
        const at::Tensor scale = read_view(source.get(specs[i + 1])).to(options.device);
        if (spec.kind == WeightKind::kFp8Weight && options.keep_fp8) {
          weights.set(spec.name, codes);
          weights.set(specs[i + 1].name, decode_e8m0(scale));
        } else if (spec.kind == WeightKind::kFp8Weight) {
          weights.set(spec.name, dequant_fp8_blockwise(codes, scale, options.dtype));
        } else if (options.dequantize_fp4_experts) {
          weights.set(spec.name, dequant_fp4(codes, scale, options.dtype));
        } else {
          weights.set(spec.name, codes);
          weights.set(specs[i + 1].name, scale);
        }
        break;
      }
    }
  }
  weights.check_complete(format);

  LoadReport result;
  result.format = format;
  result.spelling = spelling;
  result.loaded = static_cast<int64_t>(source.used().size());
  for (const std::string& name : checkpoint.names()) {
    if (source.used().count(name)) continue;
    if (is_routed_expert(name)) {
      ++result.skipped_experts;
    } else {
      ++result.ignored;
      if (result.ignored_examples.size() < kIgnoredExamples) result.ignored_examples.push_back(name);
    }
  }
  if (report) *report = std::move(result);
  return weights;
}

}  // namespace deepinfer::model
