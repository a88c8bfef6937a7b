#include "model/random_weights.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "model/cuda/kernels.h"
#include "model/quant.h"

namespace deepinfer::model {
namespace {

uint64_t fnv1a(std::string_view text) {
  uint64_t hash = 1469598103934665603ull;
  for (char ch : text) {
    hash ^= static_cast<unsigned char>(ch);
    hash *= 1099511628211ull;
  }
  return hash;
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}
bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

// The generator of one tensor: CPU (mt19937) or, on a CUDA device, the GPU's Philox generator.
at::Generator make_generator(uint64_t seed, at::Device device) {
  if (device.is_cuda() && cuda::built()) return cuda::make_generator(seed, device);
  TORCH_CHECK(device.is_cpu(), "random_tensor: drawing on ", device, " needs the CUDA build");
  return at::detail::createCPUGenerator(seed);
}

struct Draw {
  at::Generator gen;
  at::TensorOptions options;  // float32 on the drawing device
};

at::Tensor normal(Draw& d, at::IntArrayRef shape, double mean, double std) {
  return at::randn(shape, d.gen, d.options).mul_(std).add_(mean);
}
at::Tensor uniform(Draw& d, at::IntArrayRef shape, double low, double high) {
  return at::rand(shape, d.gen, d.options).mul_(high - low).add_(low);
}

}  // namespace

at::Tensor random_tensor(const ModelConfig& config, const WeightSpec& spec, uint64_t seed, at::Device device) {
  TORCH_CHECK(spec.kind != WeightKind::kFp8Scale && spec.kind != WeightKind::kFp4Scale, "random_tensor: ", spec.name,
              " is a quantization scale; draw its weight instead");
  Draw gen{make_generator(splitmix64(seed ^ fnv1a(spec.name)), device), at::TensorOptions().dtype(at::kFloat).device(device)};
  const std::string& name = spec.name;
  const at::IntArrayRef shape = spec.logical_shape;
  if (ends_with(name, "tid2eid")) {
    // Each row: k distinct experts (a prefix of a random permutation).
    const int64_t rows = shape[0], k = shape[1];
    const at::Tensor keys = at::rand({rows, config.n_routed_experts}, gen.gen, gen.options);
    return std::get<1>(keys.topk(k, /*dim=*/1)).contiguous();
  }
  if (ends_with(name, "hc_attn_fn") || ends_with(name, "hc_ffn_fn") || name == "hc_head_fn") {
    return normal(gen, shape, 0.0, 1.0 / std::sqrt(static_cast<double>(shape[1])));
  }
  if (ends_with(name, "_base")) return normal(gen, shape, 0.0, 0.5);    // hc_*_base
  if (ends_with(name, "_scale")) return uniform(gen, shape, 0.5, 1.5);  // hc_*_scale
  if (ends_with(name, "attn_sink")) return normal(gen, shape, 0.0, 1.0);
  if (ends_with(name, ".ape")) return normal(gen, shape, 0.0, 0.5);
  if (ends_with(name, "gate.bias")) return normal(gen, shape, 0.0, 0.1);
  if (ends_with(name, "norm.weight")) return normal(gen, shape, 1.0, 0.1);  // every RMSNorm weight
  if (name == "embed.weight") return normal(gen, shape, 0.0, 1.0);
  TORCH_CHECK(shape.size() == 2 && contains(name, "weight"), "random_tensor: no rule for ", name);
  // Linear [out, in]: unit-variance outputs for unit-variance inputs.
  return normal(gen, shape, 0.0, 1.0 / std::sqrt(static_cast<double>(shape[1])));
}

ModelWeights random_weights(const ModelConfig& config, const WeightFormat& format, uint64_t seed, at::Device device,
                            std::optional<ExpertRange> experts, bool keep_fp8) {
  TORCH_CHECK(format.dense_dtype == io::DType::kF32 || format.dense_dtype == io::DType::kBF16,
              "random_weights: dense dtype must be F32 or BF16, got ", std::string(io::dtype_name(format.dense_dtype)));
  const at::ScalarType dtype = format.dense_dtype == io::DType::kF32 ? at::kFloat : at::kBFloat16;
  const ExpertRange range = experts.value_or(ExpertRange{0, config.n_routed_experts});
  ModelWeights weights(ModelWeights::Options{config, dtype, device, range});
  const at::Device draw = device.is_cuda() ? device : at::Device(at::kCPU);
  for (const WeightSpec& spec : weight_specs(config, format, range)) {
    switch (spec.kind) {
      case WeightKind::kFp8Scale:
      case WeightKind::kFp4Scale: break;
      case WeightKind::kFloat32:
      case WeightKind::kInt64: weights.set(spec.name, random_tensor(config, spec, seed, draw)); break;
      case WeightKind::kDense: weights.set(spec.name, random_tensor(config, spec, seed, draw).to(dtype)); break;
      case WeightKind::kFp8Weight: {
        auto [codes, scale] = quantize_fp8_blockwise(random_tensor(config, spec, seed, draw));
        if (keep_fp8) {
          weights.set(spec.name, codes);
          weights.set(scale_name(spec.name), decode_e8m0(scale));
        } else {
          weights.set(spec.name, dequant_fp8_blockwise(codes, scale, dtype));
        }
        break;
      }
      case WeightKind::kFp4Weight: {
        auto [packed, scale] = quantize_fp4(random_tensor(config, spec, seed, draw));
        weights.set(spec.name, packed);
        weights.set(scale_name(spec.name), scale);
        break;
      }
    }
  }
  return weights;
}

}  // namespace deepinfer::model
