#pragma once
// ModelWeights: the model's tensors by official name (weight_specs.h) on one device, in the
// in-memory form the forward reads:
//   kDense specs      -> compute dtype (F32 or BF16), logical shape
//   kFloat32 specs    -> float32;  kInt64 (tid2eid) -> int64
//   FP8 linears       -> either dequantized at load to the compute dtype, under the ".weight"
//                        name (no ".scale" entry is kept), or kept: the e4m3 codes uint8
//                        [out, in] under ".weight" plus their block scales decoded to float32
//                        [ceil(out/128), ceil(in/128)] under ".scale" (LoadOptions::keep_fp8,
//                        random_weights; what cuda::fp8_linear reads); linear() gives either.
//   routed experts    -> either dense (compute dtype, logical shape) or packed FP4: uint8
//                        [out, in/2] under ".weight" plus uint8 e8m0 [out, in/32] under
//                        ".scale"; expert_matrix() dequantizes packed ones on demand.
// Only the routed experts of experts() are held (expert parallelism).
// Owns: storage and lookup with errors naming the tensor. Does not own: reading files
// (checkpoint_loader), generating values (random_weights), or the forward.

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "model/model_config.h"
#include "model/weight_specs.h"

namespace deepinfer::model {

// A projection's weight as held: dense [out, in] in the compute dtype, or kept FP8 (codes and
// float32 block scales, as above).
struct Linear {
  at::Tensor weight;
  at::Tensor scale;  // defined only for kept FP8
  bool fp8() const { return scale.defined(); }
};

class ModelWeights final {
 public:
  struct Options {
    ModelConfig config;
    at::ScalarType dtype = at::kFloat;  // compute dtype: kFloat or kBFloat16
    at::Device device = at::kCPU;
    ExpertRange experts{0, 0};  // routed experts held; {0,0} means all
  };
  explicit ModelWeights(Options options);

  const ModelConfig& config() const { return options_.config; }
  at::ScalarType dtype() const { return options_.dtype; }
  at::Device device() const { return options_.device; }
  const ExpertRange& experts() const { return options_.experts; }

  // Stores a tensor (moved to device(); dtype kept as given: the caller converts).
  void set(const std::string& name, at::Tensor tensor);
  bool contains(std::string_view name) const;
  // Throws (TORCH_CHECK) naming the tensor when absent.
  const at::Tensor& get(std::string_view name) const;
  // "layers.L." + suffix, e.g. layer(2, "attn.wq_a.weight").
  const at::Tensor& layer(int64_t layer, std::string_view suffix) const;
  // The projection "layers.L." + name + ".weight" (and its ".scale" where kept FP8), e.g.
  // linear(2, "attn.wq_a").
  Linear linear(int64_t layer, std::string_view name) const;
  std::vector<std::string> names() const;  // sorted
  int64_t size() const { return static_cast<int64_t>(tensors_.size()); }

  // Routed expert matrix `which` in {"w1","w2","w3"} as a dense [out, in] tensor in the
  // compute dtype (dequantizing packed FP4). Throws when the expert is not held.
  at::Tensor expert_matrix(int64_t layer, int64_t expert, std::string_view which) const;
  bool expert_packed(int64_t layer, int64_t expert) const;

  // Checks every spec of weight_specs(config, format, experts()) is present in its
  // in-memory form (shape and dtype as described above); throws naming the tensor.
  void check_complete(const WeightFormat& format) const;

  // Bytes `specs` take in the in-memory form above with compute dtype `dtype` (FP8 linears
  // dequantized, or kept when `keep_fp8`: a byte per code and 4 per block scale; packed FP4
  // experts and their scales as stored): the weights' share of a memory plan, known before
  // anything is loaded.
  static int64_t held_bytes(const std::vector<WeightSpec>& specs, at::ScalarType dtype, bool keep_fp8 = false);

 private:
  void expect_quantized(const WeightSpec& spec, at::ScalarType scale_dtype, const std::vector<int64_t>& scale_shape) const;

  Options options_;
  std::map<std::string, at::Tensor, std::less<>> tensors_;
};

// Torch dtype for an io dtype of dense data (F32, BF16, F16, I64, I32, U8/I8/F8 as uint8).
at::ScalarType torch_dtype(io::DType dtype);

}  // namespace deepinfer::model
