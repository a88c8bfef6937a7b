#include "model/weights.h"

#include "model/quant.h"

namespace deepinfer::model {
namespace {

std::string shape_string(at::IntArrayRef shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

void expect(const at::Tensor& tensor, const std::string& name, at::ScalarType dtype, const std::vector<int64_t>& shape) {
  TORCH_CHECK(tensor.scalar_type() == dtype, "weight ", name, ": expected dtype ", dtype, ", got ", tensor.scalar_type());
  TORCH_CHECK(tensor.sizes() == at::IntArrayRef(shape), "weight ", name, ": expected shape ", shape_string(shape), ", got ",
              shape_string(tensor.sizes()));
}

}  // namespace

at::ScalarType torch_dtype(io::DType dtype) {
  switch (dtype) {
    case io::DType::kF32: return at::kFloat;
    case io::DType::kF16: return at::kHalf;
    case io::DType::kBF16: return at::kBFloat16;
    case io::DType::kI64: return at::kLong;
    case io::DType::kI32: return at::kInt;
    case io::DType::kI8: return at::kChar;
    case io::DType::kU8:
    case io::DType::kF8E4M3:
    case io::DType::kF8E8M0: return at::kByte;
  }
  TORCH_CHECK(false, "torch_dtype: unknown io dtype ", static_cast<int>(dtype));
}

ModelWeights::ModelWeights(Options options) : options_(std::move(options)) {
  options_.config.validate();
  TORCH_CHECK(options_.dtype == at::kFloat || options_.dtype == at::kBFloat16,
              "ModelWeights: compute dtype must be float32 or bfloat16, got ", options_.dtype);
  ExpertRange& range = options_.experts;
  if (range.first == 0 && range.last == 0) range.last = options_.config.n_routed_experts;
  TORCH_CHECK(range.first >= 0 && range.first < range.last && range.last <= options_.config.n_routed_experts,
              "ModelWeights: expert range [", range.first, ", ", range.last, ") is not a non-empty part of [0, ",
              options_.config.n_routed_experts, ")");
}

void ModelWeights::set(const std::string& name, at::Tensor tensor) {
  TORCH_CHECK(tensor.defined(), "ModelWeights::set: tensor ", name, " is undefined");
  tensors_[name] = tensor.to(options_.device).contiguous();
}

bool ModelWeights::contains(std::string_view name) const { return tensors_.find(name) != tensors_.end(); }

const at::Tensor& ModelWeights::get(std::string_view name) const {
  auto it = tensors_.find(name);
  TORCH_CHECK(it != tensors_.end(), "model weight '", std::string(name), "' is missing");
  return it->second;
}

const at::Tensor& ModelWeights::layer(int64_t layer, std::string_view suffix) const {
  return get(layer_prefix(layer) + std::string(suffix));
}

Linear ModelWeights::linear(int64_t layer, std::string_view name) const {
  const std::string prefix = layer_prefix(layer) + std::string(name);
  Linear out{get(prefix + ".weight"), {}};
  if (out.weight.scalar_type() == at::kByte) out.scale = get(prefix + ".scale");
  return out;
}

std::vector<std::string> ModelWeights::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& entry : tensors_) out.push_back(entry.first);
  return out;
}

bool ModelWeights::expert_packed(int64_t layer, int64_t expert) const {
  return get(expert_prefix(layer, expert) + "w1.weight").scalar_type() == at::kByte;
}

at::Tensor ModelWeights::expert_matrix(int64_t layer, int64_t expert, std::string_view which) const {
  TORCH_CHECK(which == "w1" || which == "w2" || which == "w3", "expert_matrix: which must be w1, w2 or w3, got ", std::string(which));
  TORCH_CHECK(options_.experts.contains(expert), "expert_matrix: expert ", expert, " of layer ", layer, " is not held (range [",
              options_.experts.first, ", ", options_.experts.last, "))");
  const std::string name = expert_prefix(layer, expert) + std::string(which) + ".weight";
  const at::Tensor& weight = get(name);
  if (weight.scalar_type() == at::kByte) return dequant_fp4(weight, get(scale_name(name)), options_.dtype);
  return weight.scalar_type() == options_.dtype ? weight : weight.to(options_.dtype);
}

// A quantized spec held either dequantized (compute dtype, logical shape) or as its stored bytes
// with a ".scale" of `scale_dtype` and `scale_shape`.
void ModelWeights::expect_quantized(const WeightSpec& spec, at::ScalarType scale_dtype, const std::vector<int64_t>& scale_shape) const {
  const at::Tensor& weight = get(spec.name);
  if (weight.scalar_type() != at::kByte) return expect(weight, spec.name, options_.dtype, spec.logical_shape);
  expect(weight, spec.name, at::kByte, spec.shape);
  const std::string scale = scale_name(spec.name);
  expect(get(scale), scale, scale_dtype, scale_shape);
}

void ModelWeights::check_complete(const WeightFormat& format) const {
  for (const WeightSpec& spec : weight_specs(options_.config, format, options_.experts)) {
    switch (spec.kind) {
      case WeightKind::kDense: expect(get(spec.name), spec.name, options_.dtype, spec.logical_shape); break;
      case WeightKind::kFp8Weight:  // kept: float32 [ceil(out/128), ceil(in/128)] scales
        expect_quantized(spec, at::kFloat, {ceil_div(spec.logical_shape[0], kFp8Block), ceil_div(spec.logical_shape[1], kFp8Block)});
        break;
      case WeightKind::kFloat32: expect(get(spec.name), spec.name, at::kFloat, spec.logical_shape); break;
      case WeightKind::kInt64: expect(get(spec.name), spec.name, at::kLong, spec.logical_shape); break;
      case WeightKind::kFp8Scale:
      case WeightKind::kFp4Scale: break;  // checked with their weight
      case WeightKind::kFp4Weight:        // packed: e8m0 [out, ceil(in/32)] scales
        expect_quantized(spec, at::kByte, {spec.logical_shape[0], ceil_div(spec.logical_shape[1], kFp4Block)});
        break;
    }
  }
}

int64_t ModelWeights::held_bytes(const std::vector<WeightSpec>& specs, at::ScalarType dtype, bool keep_fp8) {
  const auto numel = [](const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (const int64_t d : shape) n *= d;
    return n;
  };
  const int64_t compute = static_cast<int64_t>(c10::elementSize(dtype));
  int64_t total = 0;
  for (const WeightSpec& spec : specs) {
    switch (spec.kind) {
      case WeightKind::kDense: total += numel(spec.logical_shape) * compute; break;
      case WeightKind::kFp8Weight: total += numel(spec.logical_shape) * (keep_fp8 ? 1 : compute); break;
      case WeightKind::kFloat32: total += numel(spec.logical_shape) * 4; break;
      case WeightKind::kInt64: total += numel(spec.logical_shape) * 8; break;
      case WeightKind::kFp8Scale: total += keep_fp8 ? numel(spec.shape) * 4 : 0; break;  // else folded into the weight
      case WeightKind::kFp4Weight:
      case WeightKind::kFp4Scale: total += numel(spec.shape); break;  // one byte per stored element
    }
  }
  return total;
}

}  // namespace deepinfer::model
