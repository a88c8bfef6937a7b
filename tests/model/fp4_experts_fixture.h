#pragma once
// One MoE layer (layer 0) of random packed FP4 routed experts on a CUDA device, and random
// routings of tokens over them: for moe_fp4_cuda_test.cpp and moe_bench.cpp. Codes are uniform
// over the 16 e2m1 values; the e8m0 scales sit around 2^-log2(sqrt(cols)), so a row times a unit
// normal x is of order 1 to 10 and SwiGLU's clamp (10) sometimes bites.

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "model/cuda/kernels.h"
#include "model/model_config.h"
#include "model/weight_specs.h"
#include "model/weights.h"

namespace deepinfer::model::testing {

// tiny_fast_test_config() with the MoE dimensions replaced.
inline ModelConfig expert_config(int64_t hidden, int64_t intermediate, int64_t experts, int64_t k, double swiglu_limit = 10.0) {
  ModelConfig c = tiny_fast_test_config();
  c.hidden_size = hidden;
  c.moe_intermediate_size = intermediate;
  c.n_routed_experts = experts;
  c.num_experts_per_tok = k;
  c.swiglu_limit = swiglu_limit;
  c.validate();
  return c;
}

// Experts `owned` of layer 0, packed FP4 on `device` (a CUDA device), seeded.
inline ModelWeights random_fp4_experts(const ModelConfig& c, ExpertRange owned, uint64_t seed, at::Device device) {
  ModelWeights weights({.config = c, .dtype = at::kBFloat16, .device = device, .experts = owned});
  at::Generator gen = cuda::make_generator(seed, device);
  const at::TensorOptions bytes = at::TensorOptions().dtype(at::kByte).device(device);
  const int64_t D = c.hidden_size, I = c.moe_intermediate_size;
  struct Matrix {
    const char* name;
    int64_t rows, cols;
  };
  for (int64_t e = owned.first; e < owned.last; ++e) {
    for (const Matrix& m : {Matrix{"w1", I, D}, Matrix{"w3", I, D}, Matrix{"w2", D, I}}) {
      const std::string name = expert_prefix(/*layer=*/0, e) + m.name + ".weight";
      const int64_t center = 127 - std::lround(std::log2(std::sqrt(static_cast<double>(m.cols))));
      weights.set(name, at::randint(0, 256, {m.rows, m.cols / 2}, gen, bytes));
      weights.set(scale_name(name), at::randint(center - 2, center + 2, {m.rows, m.cols / 32}, gen, bytes));
    }
  }
  return weights;
}

// Routing of `tokens` tokens: k distinct expert ids per token out of `experts`; with `hot` > 0
// the first `hot` experts are picked first (skewed counts: some experts get most rows).
struct Routing {
  at::Tensor x;        // [tokens, D] bfloat16
  at::Tensor experts;  // [tokens, k] int64
  at::Tensor weights;  // [tokens, k] float32
};
inline Routing random_routing(int64_t tokens, int64_t hidden, int64_t experts, int64_t k, int64_t hot, at::Generator& gen,
                              at::Device device) {
  const at::TensorOptions f32 = at::TensorOptions().dtype(at::kFloat).device(device);
  at::Tensor scores = at::rand({tokens, experts}, gen, f32);
  if (hot > 0) scores.narrow(1, 0, hot).add_(1.0);
  Routing r;
  r.x = at::randn({tokens, hidden}, gen, f32).to(at::kBFloat16);
  r.experts = std::get<1>(scores.topk(k, /*dim=*/1));
  r.weights = at::rand({tokens, k}, gen, f32);
  return r;
}

}  // namespace deepinfer::model::testing
