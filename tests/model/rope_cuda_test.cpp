// The attention projections' RMSNorm + RoPE kernel (model/cuda/rope.h) on the GPU (label cuda;
// skips with a message without one), against the ATen ops it replaces (rms_norm, then
// RopeAngles::apply), over the tiny and the real shapes (q 64 x 512, kv 512, indexer q 64 x 128,
// RoPE 64; q_norm 1024 without RoPE) and odd ones (4-byte path, RoPE over the whole head),
// T 1 / 7 / 300 / 4096 rows at random positions up to 2^20, both ropes and a bfloat16-rounded
// table, with and without the norm and its weight (float32 and bfloat16), forward and inverse,
// in place and into a NaN-poisoned tensor; every output finite. RoPE alone: the bits of apply().
// With the norm: the kernel's norm within one bfloat16 ulp of rms_norm's, the norm + RoPE the bits
// of apply() on those normed values, and the whole within 1/32 per vector (max |diff| / max
// |value|: a flipped rounding of the norm, then RoPE's) of the ATen ops.
// Batch invariance: a row's result is the same bits alone and inside batches of 1..256 random
// rows. And the forward with the kernel against the forward with the ATen ops.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "model/arithmetic.h"
#include "model/cuda/kernels.h"
#include "model/expert_parallel.h"
#include "model/model_config.h"
#include "model/ops.h"
#include "model/random_weights.h"
#include "tests/model/forward_test_util.h"

namespace deepinfer::model::testing {
namespace {

struct Shape {
  const char* name;
  int64_t heads;  // 0: x is [T, d]
  int64_t dim;
  int64_t rope;  // 0: norm only
};

// What one call computes: the norm (and its weight's dtype, or none), RoPE and its direction.
struct Mode {
  bool norm;
  at::ScalarType weight;  // kFloat, kBFloat16, or kByte for no weight
  bool rope;
  bool inverse;
};

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  const at::ScalarType bits = a.element_size() == 4 ? at::kInt : at::kShort;
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() && at::equal(a.contiguous().view(bits), b.contiguous().view(bits));
}

at::Tensor aten_path(const at::Tensor& x, const Mode& mode, const at::Tensor& weight, double eps, const RopeAngles& angles) {
  at::Tensor y = mode.norm ? rms_norm(x, weight, eps) : x;
  return mode.rope ? angles.apply(y, mode.inverse) : y;
}

// The kernel in place on a copy of x, or into a tensor of NaNs.
at::Tensor kernel_path(const at::Tensor& x, const Mode& mode, const at::Tensor& weight, double eps, const RopeAngles& angles,
                       bool in_place) {
  at::Tensor out = in_place ? x.clone() : at::full_like(x, std::numeric_limits<float>::quiet_NaN());
  cuda::norm_rope({.x = in_place ? out : x,
                   .weight = weight,
                   .cos = mode.rope ? angles.cos_table() : at::Tensor(),
                   .sin = mode.rope ? angles.sin_table(mode.inverse) : at::Tensor(),
                   .norm = mode.norm,
                   .eps = eps},
                  out);
  return out;
}

// The worst vector's max |got - want| / max |want| (float64).
double worst_relative(const at::Tensor& got, const at::Tensor& want) {
  const int64_t d = want.size(-1);
  const at::Tensor g = got.reshape({-1, d}).to(at::kDouble), w = want.reshape({-1, d}).to(at::kDouble);
  return ((g - w).abs().amax(-1) / w.abs().amax(-1).clamp_min(1e-30)).max().item<double>();
}

// The largest |got - want| in bfloat16 units in the last place of the larger of the two
// (2^(floor(log2 |v|) - 7); 8 significant bits).
double max_ulps(const at::Tensor& got, const at::Tensor& want) {
  const at::Tensor g = got.to(at::kDouble), w = want.to(at::kDouble);
  const at::Tensor ulp = at::exp2(at::floor(at::log2(at::maximum(g.abs(), w.abs()))) - 7), diff = (g - w).abs();
  return at::where(diff == 0, at::zeros_like(diff), diff / ulp).max().item<double>();
}

at::Tensor random_x(int64_t T, const Shape& s, at::Device device) {
  std::vector<int64_t> sizes{T};
  if (s.heads > 0) sizes.push_back(s.heads);
  sizes.push_back(s.dim);
  at::Tensor x = (at::randn(sizes, at::TensorOptions(device)) * 3).to(at::kBFloat16);
  if (T > 2) {
    x[0].zero_();  // a zero vector (the norm's eps alone) and negative zeros
    x[1].fill_(-0.0);
  }
  return x;
}

std::vector<Mode> modes_for(const Shape& s) {
  if (s.rope == 0) return {{true, at::kByte, false, false}, {true, at::kBFloat16, false, false}, {true, at::kFloat, false, false}};
  return {{false, at::kByte, true, false},    {false, at::kByte, true, true},  {true, at::kByte, true, false},
          {true, at::kBFloat16, true, false}, {true, at::kFloat, true, false}, {true, at::kBFloat16, true, true},
          {true, at::kBFloat16, false, false}};
}

const std::vector<Shape> kShapes{{"tiny q", 8, 64, 16},       {"tiny kv", 0, 64, 16},    {"tiny index q", 16, 32, 16},
                                 {"tiny q_norm", 0, 128, 0},  {"q", 64, 512, 64},        {"kv", 0, 512, 64},
                                 {"index q", 64, 128, 64},    {"q_norm", 0, 1024, 0},    {"odd 4-byte", 3, 6, 4},
                                 {"odd 4-byte kv", 0, 18, 6}, {"whole head", 2, 24, 24}, {"one pair", 5, 2, 2},
                                 {"wide, rope 8", 3, 40, 8}};

TEST(RopeCuda, MatchesTheAtenOps) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: the kernel runs only on CUDA";
  const at::Device cuda(at::kCUDA, 0);
  at::manual_seed(11);
  const YarnScaling yarn;
  const double eps = 1e-6;
  int runs = 0;
  double worst = 0, worst_ulps = 0;
  for (const Shape& s : kShapes) {
    for (const int64_t T : {1, 7, 300, 4096}) {
      const int64_t r = std::max<int64_t>(s.rope, 2);  // a table for the norm-only shapes too (unused)
      const bool compress = T % 2 == 0;                // T 300 and 4096: the compress rope with YaRN, else the main one
      const Rope rope(rope_inv_freq(r, compress ? 160000.0 : 10000.0, compress ? &yarn : nullptr).to(cuda));
      const at::Tensor positions = at::randint(0, 1 << 20, {T}, at::TensorOptions(cuda).dtype(at::kLong));
      const at::Tensor x = random_x(T, s, cuda);
      for (const at::ScalarType table : {at::kFloat, at::kBFloat16}) {
        if (table == at::kBFloat16 && T != 7) continue;  // the transformers-style rounded table: one size
        const RopeAngles angles = rope.angles(positions, table);
        for (const Mode& mode : modes_for(s)) {
          const at::Tensor weight = mode.weight == at::kByte ? at::Tensor() : (at::rand({s.dim}, x.options()) + 0.5).to(mode.weight);
          const std::string what = std::string(s.name) + ", T " + std::to_string(T) + (mode.norm ? ", norm" : "") +
                                   (mode.weight == at::kFloat      ? " float32 weight"
                                    : mode.weight == at::kBFloat16 ? " bf16 weight"
                                                                   : "") +
                                   (mode.rope ? (mode.inverse ? ", inverse rope" : ", rope") : "") +
                                   (table == at::kBFloat16 ? ", bf16 table" : "");
          // The kernel's norm alone: within one rounding of rms_norm's. What follows it must then
          // be apply() of exactly these values.
          at::Tensor normed = x;
          if (mode.norm) {
            normed = kernel_path(x, {true, mode.weight, false, false}, weight, eps, angles, /*in_place=*/false);
            const double ulps = max_ulps(normed, rms_norm(x, weight, eps));
            worst_ulps = std::max(worst_ulps, ulps);
            ASSERT_LE(ulps, 1.0) << what << ": the norm is more than a bfloat16 rounding from rms_norm";
          }
          const at::Tensor exact = mode.rope ? angles.apply(normed, mode.inverse) : normed;
          const at::Tensor want = aten_path(x, mode, weight, eps, angles);
          for (const bool in_place : {false, true}) {
            const at::Tensor got = kernel_path(x, mode, weight, eps, angles, in_place);
            const std::string where = what + (in_place ? ", in place" : "");
            ASSERT_TRUE(got.isfinite().all().item<bool>()) << where << ": a non-finite value (a channel not written?)";
            ASSERT_TRUE(same_bits(got, exact)) << where << ": differs from RopeAngles::apply of the normed values";
            if (!mode.norm) {
              ASSERT_TRUE(same_bits(got, want)) << where << ": RoPE differs from RopeAngles::apply";
            }
            // The whole against the ATen ops: a flip of the norm's rounding moves a value by an
            // ulp (2^-8 .. 2^-7 of it), and RoPE and the final rounding can add about one more.
            const double rel = worst_relative(got, want);
            worst = std::max(worst, rel);
            ASSERT_LE(rel, 1.0 / 32) << where << ": beyond a bfloat16 rounding of the norm";
            ++runs;
          }
        }
      }
    }
  }
  std::printf(
      "[norm_rope] %d runs against the ATen ops: RoPE bit for bit (on the kernel's normed values with the norm); the norm within %.2g "
      "bfloat16 ulp of rms_norm; worst per-vector max |diff| / max |value| against the ATen ops %.3g\n",
      runs, worst_ulps, worst);
}

// Each call's target row alone and inside batches of n random rows at random positions (the
// target at a random place): the same bits.
TEST(RopeCuda, BatchInvariant) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: the kernel runs only on CUDA";
  const at::Device cuda(at::kCUDA, 0);
  at::manual_seed(12);
  std::mt19937_64 rng(12);
  const YarnScaling yarn;
  const Rope rope(rope_inv_freq(64, 160000.0, &yarn).to(cuda));
  const double eps = 1e-6;
  const std::vector<std::pair<Shape, Mode>> calls{{{"q", 64, 512, 64}, {true, at::kByte, true, false}},
                                                  {{"kv", 0, 512, 64}, {true, at::kBFloat16, true, false}},
                                                  {{"index q", 64, 128, 64}, {false, at::kByte, true, false}},
                                                  {{"output", 64, 512, 64}, {false, at::kByte, true, true}},
                                                  {{"q_norm", 0, 1024, 0}, {true, at::kBFloat16, false, false}}};
  int checked = 0;
  for (const auto& [s, mode] : calls) {
    const at::Tensor target = random_x(1, s, cuda);
    const int64_t position = 777777;
    const at::Tensor weight = mode.weight == at::kByte ? at::Tensor() : (at::rand({s.dim}, at::TensorOptions(cuda)) + 0.5).to(mode.weight);
    const RopeAngles alone_angles = rope.angles(at::full({1}, position, at::TensorOptions(cuda).dtype(at::kLong)));
    const at::Tensor alone = kernel_path(target, mode, weight, eps, alone_angles, /*in_place=*/false);
    for (const int64_t n : {1, 2, 5, 31, 64, 100, 255, 256}) {
      const int64_t at_row = static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
      at::Tensor x = random_x(n, s, cuda);
      x[at_row].copy_(target[0]);
      at::Tensor positions = at::randint(0, 1 << 20, {n}, at::TensorOptions(cuda).dtype(at::kLong));
      positions[at_row].fill_(position);
      const RopeAngles angles = rope.angles(positions);
      ASSERT_TRUE(same_bits(angles.cos_table()[at_row], alone_angles.cos_table()[0]) &&
                  same_bits(angles.sin_table(mode.inverse)[at_row], alone_angles.sin_table(mode.inverse)[0]))
          << "the tables themselves differ at the target's row";
      for (const bool in_place : {false, true}) {
        const at::Tensor batched = kernel_path(x, mode, weight, eps, angles, in_place);
        EXPECT_TRUE(same_bits(batched[at_row], alone[0]))
            << s.name << ": row " << at_row << " of " << n << " differs from the row alone" << (in_place ? " (in place)" : "");
        ++checked;
      }
    }
  }
  std::printf("[norm_rope] %d batches: the target row bit for bit as alone\n", checked);
}

// The official arithmetic with the projections' norms and RoPE in ATen ops.
class AtenRope final : public Arithmetic {
 public:
  bool ropes_in_place(const at::Tensor&) const override { return false; }
};

// The tiny model in bfloat16 with the kernel against the same with the ATen ops, prefill chunks
// and decode steps sharing batches. A bfloat16 rounding flip in a norm can flip an expert or
// indexer pick and move a position's logits a lot, so the criterion is on the spread over
// positions (each position's max |diff| over the vocabulary), set against what chunking alone
// moves with the ATen ops (as SparseAttentionCuda.ForwardMatchesGatheredAttention); a kernel
// that rotates or normalises the wrong values moves nearly every position.
TEST(RopeCuda, ForwardMatchesTheAtenOps) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: the kernel runs only on CUDA";
  const at::Device cuda(at::kCUDA, 0);
  const char* dir = std::getenv("DEEPINFER_SOURCE_DIR");
  const ModelConfig config = load_model_config(std::string(dir != nullptr ? dir : ".") + "/configs/models/tiny.json");
  const ModelWeights weights = random_weights(config, WeightFormat{io::DType::kBF16, false, true}, /*seed=*/3, cuda);
  ASSERT_TRUE(Arithmetic::official().ropes_in_place(at::empty({1, config.hidden_size}, at::TensorOptions(cuda).dtype(at::kBFloat16))));
  ASSERT_FALSE(Arithmetic::official().ropes_in_place(at::empty({1, config.hidden_size}, at::TensorOptions(cuda).dtype(at::kFloat))));
  SingleRankCommunicator comm;
  const AtenRope aten;
  const DeepseekV4Model kernel_model(weights, comm, model_options()), aten_model(weights, comm, model_options(aten));
  constexpr int64_t kBlocks = 16;
  const auto blocks = shuffled_blocks({4, 4, 2}, kBlocks, /*seed=*/9);
  const std::vector<SeqPlan> plans{{random_tokens(420, config.vocab_size, 1), {37, 100, 250}, 2, blocks[0]},
                                   {random_tokens(400, config.vocab_size, 2), {128, 1, 127, 100}, 5, blocks[1]},
                                   {random_tokens(140, config.vocab_size, 3), {}, 7, blocks[2]}};
  const auto cache = [&] { return ModelCache(config, {.num_blocks = kBlocks, .num_slots = 8, .dtype = at::kBFloat16, .device = cuda}); };
  ModelCache c1 = cache(), c2 = cache(), c3 = cache();
  const auto with_kernel = run_incremental(kernel_model, plans, c1, nullptr, cuda);
  const auto with_aten = run_incremental(aten_model, plans, c2, nullptr, cuda);
  const auto aten_one_shot = run_one_shot(aten_model, plans, c3, cuda);
  double scale = 0;
  for (const auto& logits : with_aten) scale = std::max(scale, logits.abs().max().item<double>());
  const auto spread = [](const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
    std::vector<at::Tensor> per_position;
    for (size_t i = 0; i < a.size(); ++i) per_position.push_back(std::get<0>((a[i] - b[i]).abs().max(1)));
    const at::Tensor sorted = std::get<0>(at::cat(per_position).to(at::kDouble).sort());
    const auto at_fraction = [&](double f) { return sorted[static_cast<int64_t>(f * (sorted.numel() - 1))].item<double>(); };
    return std::array<double, 3>{at_fraction(0.5), at_fraction(0.9), at_fraction(1.0)};
  };
  const auto vs_aten = spread(with_kernel, with_aten), aten_chunking = spread(with_aten, aten_one_shot);
  std::printf(
      "[norm_rope] tiny forward, bfloat16, per-position max |diff| (median / p90 / max; max |logit| %.3g): kernel vs ATen ops "
      "%.3g / %.3g / %.3g; ATen ops chunked vs one-shot %.3g / %.3g / %.3g\n",
      scale, vs_aten[0], vs_aten[1], vs_aten[2], aten_chunking[0], aten_chunking[1], aten_chunking[2]);
  EXPECT_LT(vs_aten[0], std::max(3 * aten_chunking[0], 0.01 * scale));
  EXPECT_LT(vs_aten[1], std::max(3 * aten_chunking[1], 0.03 * scale));
  for (const auto& logits : with_kernel) EXPECT_TRUE(logits.isfinite().all().item<bool>());
}

}  // namespace
}  // namespace deepinfer::model::testing
