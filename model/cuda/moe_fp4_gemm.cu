#include "model/cuda/moe_fp4_gemm.h"

#include <algorithm>

#include "model/cuda/moe_fp4_weights.cuh"

namespace deepinfer::model::cuda {
namespace {

using namespace moe_fp4_detail;

constexpr int kMaxDim = 12288;
constexpr int64_t kMaxExperts = 1024;  // the sort keeps (32 + 1) E counters in shared memory
#ifndef DEEPINFER_MOE_STOP_AFTER
#define DEEPINFER_MOE_STOP_AFTER 9
#endif
// A measuring knob (tests/gpu/moe_micro.sh's timing-only variants): the layer stops after this
// many of its stages (1 sort, 2 gather, 3 gate/up, 4 down; 9, the default, runs them all), so the
// differences between builds are each stage's time in place. Anything below 9 gives wrong outputs.
constexpr int kStopAfter = DEEPINFER_MOE_STOP_AFTER;

// The workspace's parts, each 256-byte aligned.
struct Workspace {
  int32_t* counts;  // decode tiles, prefill tiles, owned pairs, -, prefill tiles of each width class
  int64_t* order;   // [pairs]: the owned pairs sorted by expert
  int4* small;
  int4* big;                // [kWidths][big_cap]
  uint8_t* gathered;        // the prefill tiles' x images; null when no prefill tile can exist
  uint8_t* act;             // every tile's activation image
  __nv_bfloat16* per_pair;  // [pairs, D]: each pair's y before its routing weight
  int64_t small_cap, big_cap, image_cap;
  size_t bytes;
};

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

Workspace carve(const MoeFp4Args& a) {
  const int64_t pairs = a.tokens * a.k, E = a.num_experts;
  Workspace w{};
  w.small_cap = std::min(E, pairs);
  // A prefill tile's expert has more than 8 rows: at most pairs / 9 of them, each with one
  // short tile beyond pairs / 128 full ones. Images: those experts' rows rounded up to kImageStep.
  w.big_cap = (pairs + kTileRows - 1) / kTileRows + std::min(E, pairs / (kSmallRows + 1));
  w.image_cap = pairs + (kImageStep - 1) * std::min(E, pairs / (kSmallRows + 1));
  auto* base = static_cast<uint8_t*>(a.workspace);
  size_t at = 0;
  const auto take = [&](size_t bytes) {
    uint8_t* p = base == nullptr ? nullptr : base + at;
    at += align256(bytes);
    return p;
  };
  w.counts = reinterpret_cast<int32_t*>(take((4 + kWidths) * sizeof(int32_t)));
  w.order = reinterpret_cast<int64_t*>(take(pairs * sizeof(int64_t)));
  w.small = reinterpret_cast<int4*>(take(std::max<int64_t>(w.small_cap, 1) * sizeof(int4)));
  w.big = reinterpret_cast<int4*>(take(kWidths * std::max<int64_t>(w.big_cap, 1) * sizeof(int4)));
  w.gathered = pairs > kSmallRows ? take(w.image_cap * a.hidden * 2) : nullptr;
  w.act = take(w.image_cap * a.intermediate * 2);
  w.per_pair = reinterpret_cast<__nv_bfloat16*>(take(pairs * a.hidden * 2));
  w.bytes = at;
  return w;
}

}  // namespace

bool moe_fp4_shape_supported(int64_t hidden, int64_t intermediate, int64_t experts) {
  return hidden >= kSuper && intermediate >= kSuper && hidden % kSuper == 0 && intermediate % kSuper == 0 && hidden <= kMaxDim &&
         intermediate <= kMaxDim && experts >= 1 && experts <= kMaxExperts;
}

size_t moe_fp4_workspace_bytes(const MoeFp4Args& args) {
  MoeFp4Args sizing = args;
  sizing.workspace = nullptr;
  return carve(sizing).bytes;
}

cudaError_t moe_fp4(const MoeFp4Args& a, cudaStream_t stream) {
  const int64_t pairs = a.tokens * a.k;
  if (!moe_fp4_shape_supported(a.hidden, a.intermediate, a.num_experts) || a.tokens < 0 || a.k < 1 || pairs >= (int64_t{1} << 31))
    return cudaErrorInvalidValue;
  if (a.tokens == 0) return cudaSuccess;
  if (a.w13_packed == nullptr || a.w13_scale == nullptr || a.w2_packed == nullptr || a.w2_scale == nullptr || a.x == nullptr ||
      a.experts == nullptr || a.routing_weights == nullptr || a.workspace == nullptr || a.out == nullptr)
    return cudaErrorInvalidValue;
  int device = 0, sms = 0;
  cudaError_t error = cudaGetDevice(&device);
  if (error == cudaSuccess) error = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (error != cudaSuccess) return error;
  const Workspace w = carve(a);
  const int D = static_cast<int>(a.hidden), I = static_cast<int>(a.intermediate);
  const bool prefill = pairs > kSmallRows;  // else every expert has at most 8 rows: no prefill tile, and no sort (LocalRouting)
  if (prefill && (error = launch_route(a.experts, pairs, a.first_expert, static_cast<int>(a.num_experts), w.order, w.small, w.big,
                                       w.big_cap, w.counts, stream)) != cudaSuccess)
    return error;
  if (kStopAfter <= 1) return cudaSuccess;
  if (prefill && (error = launch_gather(a.x, w.order, a.k, w.big, w.big_cap, w.counts, D, w.gathered, sms, stream)) != cudaSuccess)
    return error;
  if (kStopAfter <= 2) return cudaSuccess;
  GemmArgs up{};
  up.packed = a.w13_packed;
  up.scale = a.w13_scale;
  up.x = a.x;
  up.images = w.gathered;
  up.order = w.order;
  up.tiles = w.small;
  up.count = w.counts;
  up.act = w.act;
  up.per_pair = w.per_pair;
  up.experts = a.experts;
  up.first_expert = a.first_expert;
  up.num_experts = static_cast<int>(a.num_experts);
  up.local_pairs = prefill ? 0 : static_cast<int>(pairs);
  up.k = a.k;
  up.K = D;
  up.F = I;
  up.limit = a.swiglu_limit;
  if ((error = launch_decode<true>(up, w.small_cap, device, sms, stream)) != cudaSuccess) return error;
  GemmArgs up_big = up;
  up_big.tiles = w.big;
  up_big.count = w.counts;
  up_big.big_cap = w.big_cap;
  if (prefill && (error = launch_prefill<true>(up_big, w.big_cap, sms, stream)) != cudaSuccess) return error;
  if (kStopAfter <= 3) return cudaSuccess;
  GemmArgs down = up;
  down.packed = a.w2_packed;
  down.scale = a.w2_scale;
  down.images = w.act;
  down.K = I;
  down.F = D;
  down.limit = 0.0f;
  if ((error = launch_decode<false>(down, w.small_cap, device, sms, stream)) != cudaSuccess) return error;
  GemmArgs down_big = down;
  down_big.tiles = w.big;
  down_big.count = w.counts;
  down_big.big_cap = w.big_cap;
  if (prefill && (error = launch_prefill<false>(down_big, w.big_cap, sms, stream)) != cudaSuccess) return error;
  if (kStopAfter <= 4) return cudaSuccess;
  return launch_combine(w.per_pair, a.experts, a.routing_weights, a.tokens, static_cast<int>(a.k), a.first_expert,
                        a.first_expert + a.num_experts, D, a.out, a.per_slot, sms, stream);
}

}  // namespace deepinfer::model::cuda
