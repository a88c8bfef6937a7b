#include "model/moe_grouped.h"

#include <vector>

#include "model/cuda/kernels.h"
#include "model/ops.h"
#include "model/torch_compat.h"
#include "model/weight_specs.h"

namespace deepinfer::model {
namespace {

// int64 [n] on `device` holding the data pointers of `tensors` (from pinned memory, without
// waiting for the device: the first step builds these tables).
at::Tensor pointer_table(const std::vector<const at::Tensor*>& tensors, at::Device device) {
  std::vector<int64_t> pointers;
  pointers.reserve(tensors.size());
  for (const at::Tensor* t : tensors) pointers.push_back(reinterpret_cast<int64_t>(t->data_ptr()));
  const at::Tensor host = at::tensor(pointers, at::kLong);
  return device.is_cpu() ? host : host.pin_memory().to(device, /*non_blocking=*/true);
}

bool grouped_shape(const ModelConfig& c, int64_t experts_held) {
  return c.hidden_size % 32 == 0 && c.moe_intermediate_size % 32 == 0 && experts_held > 0;
}

// Every layer's stacked dense bfloat16 copies.
int64_t stacked_bytes(const ModelConfig& c, int64_t experts_held) {
  return c.num_layers * experts_held * 3 * c.moe_intermediate_size * c.hidden_size * 2;
}

// Whether model/cuda/moe_fp4_gemm.h's kernels take this model, `experts_held` experts per layer, on `device`.
bool fp4_kernels(const ModelConfig& c, int64_t experts_held, at::Device device) {
  return cuda::moe_fp4_supported(device, c.hidden_size, c.moe_intermediate_size, experts_held);
}

bool packed(const ModelWeights& weights, int64_t layer) {
  return weights.get(expert_prefix(layer, weights.experts().first) + "w1.weight").scalar_type() == at::kByte;
}

}  // namespace

bool ExpertWorkspace::usable(const ModelWeights& weights, int64_t layer, const at::Tensor& x) const {
  if (!cuda::built() || !x.is_cuda() || x.scalar_type() != at::kBFloat16) return false;
  const ModelConfig& c = weights.config();
  if (!grouped_shape(c, weights.experts().size())) return false;
  if (packed(weights, layer)) return fp4_kernels(c, weights.experts().size(), x.device()) || compat::kHasGroupedMm;
  // Dense experts: the stacked copies of every layer together must stay within the cap.
  const at::Tensor& w1 = weights.get(expert_prefix(layer, weights.experts().first) + "w1.weight");
  return compat::kHasGroupedMm && w1.scalar_type() == at::kBFloat16 && stacked_bytes(c, weights.experts().size()) <= kMaxStackedBytes;
}

bool ExpertWorkspace::runs_fp4_kernels(const ModelWeights& weights, int64_t layer, const at::Tensor& x) const {
  return usable(weights, layer, x) && packed(weights, layer) && fp4_kernels(weights.config(), weights.experts().size(), x.device());
}

int64_t ExpertWorkspace::scratch_bytes(const ModelConfig& config, bool fp4, int64_t experts_held, at::ScalarType dtype, at::Device device) {
  if (!cuda::built() || !device.is_cuda() || dtype != at::kBFloat16 || !grouped_shape(config, experts_held)) return 0;
  if (fp4 && fp4_kernels(config, experts_held, device)) return 0;
  if (!compat::kHasGroupedMm) return 0;
  if (fp4) return experts_held * 3 * config.moe_intermediate_size * config.hidden_size * 2;
  const int64_t stacked = stacked_bytes(config, experts_held);
  return stacked <= kMaxStackedBytes ? stacked : 0;
}

const ExpertWorkspace::LayerTables& ExpertWorkspace::tables(const ModelWeights& weights, int64_t layer) {
  auto found = tables_.find(layer);
  if (found != tables_.end()) return found->second;
  std::vector<const at::Tensor*> w13, w13_scale, w2, w2_scale;
  for (int64_t e = weights.experts().first; e < weights.experts().last; ++e) {
    const std::string prefix = expert_prefix(layer, e);
    for (const char* which : {"w1", "w3"}) {
      const std::string name = prefix + which + ".weight";
      w13.push_back(&weights.get(name));
      w13_scale.push_back(&weights.get(scale_name(name)));
    }
    w2.push_back(&weights.get(prefix + "w2.weight"));
    w2_scale.push_back(&weights.get(scale_name(prefix + "w2.weight")));
  }
  for (const at::Tensor* t : w13)
    TORCH_CHECK(reinterpret_cast<uintptr_t>(t->data_ptr()) % 16 == 0, "ExpertWorkspace: unaligned expert weight");
  for (const at::Tensor* t : w2)
    TORCH_CHECK(reinterpret_cast<uintptr_t>(t->data_ptr()) % 16 == 0, "ExpertWorkspace: unaligned expert weight");
  const at::Device device = weights.device();
  LayerTables t{pointer_table(w13, device), pointer_table(w13_scale, device), pointer_table(w2, device), pointer_table(w2_scale, device)};
  return tables_.emplace(layer, std::move(t)).first->second;
}

const ExpertWorkspace::Stacked& ExpertWorkspace::stacked(const ModelWeights& weights, int64_t layer) {
  auto found = stacked_.find(layer);
  if (found != stacked_.end()) return found->second;
  std::vector<at::Tensor> w13, w2;
  for (int64_t e = weights.experts().first; e < weights.experts().last; ++e) {
    const std::string prefix = expert_prefix(layer, e);
    w13.push_back(at::cat({weights.get(prefix + "w1.weight"), weights.get(prefix + "w3.weight")}, 0));
    w2.push_back(weights.get(prefix + "w2.weight"));
  }
  return stacked_.emplace(layer, Stacked{at::stack(w13), at::stack(w2)}).first->second;
}

at::Tensor ExpertWorkspace::routed_partial(const ModelWeights& weights, int64_t layer, const at::Tensor& x, const at::Tensor& experts,
                                           const at::Tensor& routing_weights) {
  TORCH_CHECK(usable(weights, layer, x), "ExpertWorkspace::routed_partial: the grouped path cannot run layer ", layer, " on ", x.device(),
              " ", x.scalar_type(), " (usable() is false)");
  const ModelConfig& c = weights.config();
  if (!packed(weights, layer) || !fp4_kernels(c, weights.experts().size(), x.device()))
    return grouped(weights, layer, x, experts, routing_weights);
  return fp4(weights, layer, x, experts, routing_weights, /*per_slot=*/false);
}

at::Tensor ExpertWorkspace::routed_slots(const ModelWeights& weights, int64_t layer, const at::Tensor& x, const at::Tensor& experts,
                                         const at::Tensor& routing_weights) {
  TORCH_CHECK(runs_fp4_kernels(weights, layer, x), "ExpertWorkspace::routed_slots: the FP4 kernels cannot run layer ", layer, " on ",
              x.device(), " ", x.scalar_type());
  return fp4(weights, layer, x, experts, routing_weights, /*per_slot=*/true);
}

at::Tensor ExpertWorkspace::fp4(const ModelWeights& weights, int64_t layer, const at::Tensor& x, const at::Tensor& experts,
                                const at::Tensor& routing_weights, bool per_slot) {
  const ModelConfig& c = weights.config();
  if (x.size(0) == 0) {
    return per_slot ? at::zeros({0, experts.size(1), c.hidden_size}, x.options().dtype(at::kFloat))
                    : at::zeros({0, c.hidden_size}, x.options().dtype(at::kFloat));
  }
  const LayerTables& t = tables(weights, layer);
  at::Tensor rows = x.contiguous();
  if (reinterpret_cast<uintptr_t>(rows.data_ptr()) % 16 != 0) rows = rows.clone();  // the kernels read x 16 bytes at a time
  return cuda::moe_fp4({.w13_packed = t.w13_packed,
                        .w13_scale = t.w13_scale,
                        .w2_packed = t.w2_packed,
                        .w2_scale = t.w2_scale,
                        .x = rows,
                        .experts = experts.contiguous(),
                        .routing_weights = routing_weights.to(at::kFloat).contiguous(),
                        .first_expert = weights.experts().first,
                        .intermediate = c.moe_intermediate_size,
                        .swiglu_limit = c.swiglu_limit,
                        .per_slot = per_slot});
}

at::Tensor ExpertWorkspace::routed_partial_dequantized(const ModelWeights& weights, int64_t layer, const at::Tensor& x,
                                                       const at::Tensor& experts, const at::Tensor& routing_weights) {
  TORCH_CHECK(compat::kHasGroupedMm && usable(weights, layer, x), "ExpertWorkspace::routed_partial_dequantized: cannot run layer ", layer,
              " on ", x.device(), " ", x.scalar_type(), " (needs usable() and LibTorch >= 2.8)");
  return grouped(weights, layer, x, experts, routing_weights);
}

at::Tensor ExpertWorkspace::grouped(const ModelWeights& weights, int64_t layer, const at::Tensor& x, const at::Tensor& experts,
                                    const at::Tensor& routing_weights) {
  const ModelConfig& c = weights.config();
  const ExpertRange& owned = weights.experts();
  const int64_t E = owned.size(), I = c.moe_intermediate_size, D = c.hidden_size, k = experts.size(1);
  if (x.size(0) == 0) return at::zeros({0, D}, x.options().dtype(at::kFloat));
  // Pairs of experts this rank does not own sort last, under key E, and fall outside every group.
  const at::Tensor flat = experts.reshape(-1);
  const at::Tensor is_owned = (flat >= owned.first) & (flat < owned.last);
  const at::Tensor key = at::where(is_owned, flat - owned.first, at::full_like(flat, E));
  const auto [sorted_key, order] = key.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false);
  // Group ends without a host read (at::bincount would read its range back): offs[e] = pairs with key <= e.
  const at::Tensor ends = at::searchsorted(sorted_key, at::arange(E, key.options()), /*out_int32=*/false, /*right=*/true);
  const at::Tensor counts = ends - at::cat({at::zeros({1}, ends.options()), ends.narrow(0, 0, E - 1)});  // [E] int64
  const at::Tensor offs = ends.to(at::kInt);
  const at::Tensor tokens = at::div(order, k, "floor");
  const at::Tensor xs = x.index_select(0, tokens);  // [P, D]

  at::Tensor w13, w2;
  if (packed(weights, layer)) {
    const LayerTables& t = tables(weights, layer);
    w13 = at::empty({E, 2 * I, D}, x.options());  // rows 0..I-1 from w1, I..2I-1 from w3
    w2 = at::empty({E, D, I}, x.options());
    at::Tensor w13_matrices = w13.view({2 * E, I, D});  // expert e: w1 at 2e, w3 at 2e + 1 (the tables' order)
    cuda::dequant_fp4_tables(t.w13_packed, t.w13_scale, counts.repeat_interleave(2), w13_matrices);
    cuda::dequant_fp4_tables(t.w2_packed, t.w2_scale, counts, w2);
  } else {
    const Stacked& s = stacked(weights, layer);
    w13 = s.w13;
    w2 = s.w2;
  }

  // The same math as Arithmetic::swiglu_mlp, over all experts at once.
  const at::Tensor h = compat::grouped_mm(xs, w13.transpose(1, 2), offs);  // [P, 2I]
  const at::Tensor act = swiglu_hidden(h.narrow(1, 0, I), h.narrow(1, I, I), c.swiglu_limit).contiguous();
  const at::Tensor y = compat::grouped_mm(act, w2.transpose(1, 2), offs);  // [P, D]; rows of other ranks' pairs unwritten
  const at::Tensor w = routing_weights.reshape(-1).index_select(0, order).unsqueeze(1);
  const at::Tensor valid = is_owned.index_select(0, order).unsqueeze(1);
  // Back to (token, slot) order, then a fixed-order sum over the k slots: an index_add over
  // repeated tokens would add with atomics in a different order on every run.
  const at::TensorOptions f32 = x.options().dtype(at::kFloat);
  at::Tensor per_pair = at::empty({flat.size(0), D}, f32);
  per_pair.index_copy_(0, order, at::where(valid, y.to(at::kFloat) * w, at::zeros({}, f32)));
  return per_pair.view({x.size(0), k, D}).sum(1);
}

}  // namespace deepinfer::model
