// The CUDA build's ATen bindings of model/cuda/kernels.h; the attention's are in
// kernels_attention.cpp, the FP8 linears' in kernels_fp8.cpp, the invariant linears' in
// kernels_linear.cpp (kept apart so that no file passes style.md's 500 lines).
#include "model/cuda/kernels.h"

#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <vector>

#include "model/cuda/binding_util.h"
#include "model/cuda/compressor.h"
#include "model/cuda/fp4_dequant.h"
#include "model/cuda/hyper_connection.h"
#include "model/cuda/moe_fp4_gemm.h"
#include "model/cuda/rope.h"
#include "model/cuda/sinkhorn.h"
#include "model/quant.h"

namespace deepinfer::model::cuda {
using namespace binding;  // check, stream_of, aligned16

bool built() { return true; }

bool sinkhorn_supported(const at::Tensor& logits, int64_t iters) {
  if (!logits.is_cuda() || logits.scalar_type() != at::kFloat || logits.dim() < 2 || iters < 1) return false;
  const int64_t n = logits.size(-1);
  return logits.size(-2) == n && (n == 1 || n == 2 || n == 4 || n == 8);
}

at::Tensor sinkhorn(const at::Tensor& logits, int64_t iters, double eps) {
  TORCH_CHECK(sinkhorn_supported(logits, iters), "cuda::sinkhorn: float32 CUDA [..., n, n] with n in {1, 2, 4, 8} expected, got ",
              logits.scalar_type(), " ", logits.sizes(), " on ", logits.device(), ", iters ", iters);
  const at::Tensor in = logits.contiguous();
  at::Tensor out = at::empty_like(in);
  const int64_t n = in.size(-1);
  const c10::cuda::CUDAGuard guard(in.device());
  check(model::cuda::sinkhorn(in.data_ptr<float>(), out.data_ptr<float>(), in.numel() / (n * n), static_cast<int>(n),
                              static_cast<int>(iters), static_cast<float>(eps), stream_of(in)),
        "sinkhorn");
  return out;
}

bool dequant_fp4_supported(const at::Tensor& packed, const at::Tensor& scale, int64_t block, at::ScalarType out_dtype) {
  return packed.is_cuda() && out_dtype == at::kBFloat16 && block == kFp4Block && (2 * packed.size(-1)) % kFp4Block == 0 &&
         packed.is_contiguous() && scale.is_contiguous() && aligned16(packed);
}

at::Tensor dequant_fp4(const at::Tensor& packed, const at::Tensor& scale) {
  TORCH_CHECK(dequant_fp4_supported(packed, scale, kFp4Block, at::kBFloat16), "cuda::dequant_fp4: contiguous, aligned CUDA uint8 packed ",
              packed.sizes(), " with 32-column blocks expected");
  const int64_t cols = 2 * packed.size(-1);
  std::vector<int64_t> sizes(packed.sizes().begin(), packed.sizes().end());
  sizes.back() = cols;
  at::Tensor out = at::empty(sizes, packed.options().dtype(at::kBFloat16));
  if (out.numel() == 0) return out;
  const c10::cuda::CUDAGuard guard(packed.device());
  check(dequant_fp4_to_bf16_one(packed.data_ptr<uint8_t>(), scale.data_ptr<uint8_t>(), out.numel() / cols, cols,
                                reinterpret_cast<uint16_t*>(out.data_ptr()), stream_of(packed)),
        "dequant_fp4_to_bf16_one");
  return out;
}

void dequant_fp4_tables(const at::Tensor& packed_table, const at::Tensor& scale_table, const at::Tensor& active, at::Tensor& out) {
  const int64_t count = packed_table.numel();
  TORCH_CHECK(out.is_cuda() && out.scalar_type() == at::kBFloat16 && out.dim() == 3 && out.size(0) == count && out.is_contiguous(),
              "cuda::dequant_fp4_tables: out must be contiguous bfloat16 CUDA [", count, ", rows, cols], got ", out.sizes());
  TORCH_CHECK(scale_table.numel() == count && active.numel() == count && packed_table.scalar_type() == at::kLong &&
                  scale_table.scalar_type() == at::kLong && active.scalar_type() == at::kLong,
              "cuda::dequant_fp4_tables: int64 tables of ", count, " entries expected");
  const c10::cuda::CUDAGuard guard(out.device());
  check(dequant_fp4_to_bf16(reinterpret_cast<const uint64_t*>(packed_table.data_ptr<int64_t>()),
                            reinterpret_cast<const uint64_t*>(scale_table.data_ptr<int64_t>()), active.data_ptr<int64_t>(), count,
                            out.size(1), out.size(2), reinterpret_cast<uint16_t*>(out.data_ptr()), stream_of(out)),
        "dequant_fp4_to_bf16");
}

bool hc_supported(const at::Tensor& streams) {
  if (!streams.is_cuda() || streams.scalar_type() != at::kBFloat16 || streams.dim() != 3 || !streams.is_contiguous()) return false;
  const int64_t n = streams.size(1), d = streams.size(2);
  return (n == 1 || n == 2 || n == 4 || n == 8) && d >= 2 && d % 2 == 0 && d <= 16384;
}

HcPreOut hc_pre(const HcPre& in) {
  TORCH_CHECK(hc_supported(in.streams),
              "cuda::hc_pre: contiguous bfloat16 CUDA streams [T, n in {1, 2, 4, 8}, D even <= 16384] expected, got ",
              in.streams.scalar_type(), " ", in.streams.sizes());
  const int64_t T = in.streams.size(0), n = in.streams.size(1), D = in.streams.size(2);
  const auto is = [](const at::Tensor& t, at::ScalarType type) { return t.defined() && t.scalar_type() == type && t.is_contiguous(); };
  TORCH_CHECK(is(in.raw, at::kFloat) && in.raw.sizes() == at::IntArrayRef({T, (2 + n) * n}) && is(in.scale, at::kFloat) &&
                  in.scale.numel() == 3 && is(in.base, at::kFloat) && in.base.numel() == (2 + n) * n &&
                  (is(in.norm_weight, at::kFloat) || is(in.norm_weight, at::kBFloat16)) && in.norm_weight.numel() == D,
              "cuda::hc_pre: float32 raw [", T, ", ", (2 + n) * n, "], scale [3], base [", (2 + n) * n, "] and a norm weight [", D,
              "] expected, got raw ", in.raw.sizes());
  check_placed("cuda::hc_pre", in.streams.device(), {&in.streams, &in.raw, &in.scale, &in.base, &in.norm_weight}, {});
  HcPreOut out{at::empty({T, D}, in.streams.options()), at::empty({T, n}, in.raw.options()), at::empty({T, n, n}, in.raw.options())};
  HcPreArgs a;
  a.streams = reinterpret_cast<const __nv_bfloat16*>(in.streams.data_ptr());
  a.raw = in.raw.data_ptr<float>();
  a.scale = in.scale.data_ptr<float>();
  a.base = in.base.data_ptr<float>();
  if (in.norm_weight.scalar_type() == at::kFloat) {
    a.norm_weight = in.norm_weight.data_ptr<float>();
  } else {
    a.norm_weight_bf16 = reinterpret_cast<const __nv_bfloat16*>(in.norm_weight.data_ptr());
  }
  a.out = reinterpret_cast<__nv_bfloat16*>(out.input.data_ptr());
  a.post = out.post.data_ptr<float>();
  a.comb = out.comb.data_ptr<float>();
  a.tokens = T;
  a.n = static_cast<int>(n);
  a.dim = static_cast<int>(D);
  a.iters = static_cast<int>(in.iters);
  a.rms_eps = static_cast<float>(in.rms_eps);
  a.hc_eps = static_cast<float>(in.hc_eps);
  const c10::cuda::CUDAGuard guard(in.streams.device());
  check(model::cuda::hc_pre(a, stream_of(in.streams)), "hc_pre");
  return out;
}

at::Tensor hc_post(const at::Tensor& streams, const at::Tensor& y, const at::Tensor& post, const at::Tensor& comb) {
  TORCH_CHECK(hc_supported(streams), "cuda::hc_post: contiguous bfloat16 CUDA streams [T, n, D] expected, got ", streams.sizes());
  const int64_t T = streams.size(0), n = streams.size(1), D = streams.size(2);
  TORCH_CHECK(y.scalar_type() == at::kBFloat16 && y.is_contiguous() && y.sizes() == at::IntArrayRef({T, D}) &&
                  post.scalar_type() == at::kFloat && post.is_contiguous() && post.sizes() == at::IntArrayRef({T, n}) &&
                  comb.scalar_type() == at::kFloat && comb.is_contiguous() && comb.sizes() == at::IntArrayRef({T, n, n}),
              "cuda::hc_post: bfloat16 y [", T, ", ", D, "], float32 post [", T, ", ", n, "] and comb [", T, ", ", n, ", ", n,
              "] expected, got ", y.sizes(), ", ", post.sizes(), ", ", comb.sizes());
  check_placed("cuda::hc_post", streams.device(), {&streams, &y, &post, &comb}, {});
  at::Tensor out = at::empty_like(streams);
  HcPostArgs a;
  a.streams = reinterpret_cast<const __nv_bfloat16*>(streams.data_ptr());
  a.y = reinterpret_cast<const __nv_bfloat16*>(y.data_ptr());
  a.post = post.data_ptr<float>();
  a.comb = comb.data_ptr<float>();
  a.out = reinterpret_cast<__nv_bfloat16*>(out.data_ptr());
  a.tokens = T;
  a.n = static_cast<int>(n);
  a.dim = static_cast<int>(D);
  const c10::cuda::CUDAGuard guard(streams.device());
  check(model::cuda::hc_post(a, stream_of(streams)), "hc_post");
  return out;
}

bool norm_rope_supported(const at::Tensor& x) {
  return x.is_cuda() && x.scalar_type() == at::kBFloat16 && (x.dim() == 2 || x.dim() == 3) && x.size(-1) >= 2 && x.size(-1) % 2 == 0;
}

void norm_rope(const NormRope& in, at::Tensor& out) {
  const at::Tensor& x = in.x;
  TORCH_CHECK(norm_rope_supported(x) && x.is_contiguous(),
              "cuda::norm_rope: contiguous bfloat16 CUDA x [T, H, d] or [T, d] with d even expected, got ", x.scalar_type(), " ", x.sizes(),
              " on ", x.device());
  TORCH_CHECK(out.is_cuda() && out.scalar_type() == at::kBFloat16 && out.is_contiguous() && out.sizes() == x.sizes(),
              "cuda::norm_rope: contiguous bfloat16 out ", x.sizes(), " expected, got ", out.scalar_type(), " ", out.sizes());
  const int64_t T = x.size(0), H = x.dim() == 3 ? x.size(1) : 1, d = x.size(-1);
  const bool rope = in.cos.defined();
  const auto table = [&](const at::Tensor& t) {
    return t.defined() && t.scalar_type() == at::kFloat && t.is_contiguous() && t.dim() == 3 && t.size(0) == T && t.size(2) == 2 &&
           2 * t.size(1) <= d;
  };
  TORCH_CHECK(!rope || (table(in.cos) && in.sin.sizes() == in.cos.sizes() && table(in.sin)),
              "cuda::norm_rope: contiguous float32 cos and sin tables [", T, ", r / 2 <= ", d / 2, ", 2] expected, got ", in.cos.sizes(),
              " and ", in.sin.defined() ? in.sin.sizes() : at::IntArrayRef());
  TORCH_CHECK(rope || !in.sin.defined(), "cuda::norm_rope: a sin table without its cos table");
  TORCH_CHECK(!in.weight.defined() || (in.norm && (in.weight.scalar_type() == at::kFloat || in.weight.scalar_type() == at::kBFloat16) &&
                                       in.weight.is_contiguous() && in.weight.numel() == d),
              "cuda::norm_rope: a norm weight needs norm and must be float32 or bfloat16 [", d, "], got ",
              in.weight.defined() ? in.weight.sizes() : at::IntArrayRef());
  check_placed("cuda::norm_rope", x.device(), {&in.x, &in.weight, &in.cos, &in.sin, &out}, {});
  if (x.numel() == 0) return;
  const int64_t r = rope ? 2 * in.cos.size(1) : 0;
  const bool wide = d % 8 == 0 && r % 8 == 0;
  TORCH_CHECK(reinterpret_cast<uintptr_t>(x.data_ptr()) % (wide ? 16 : 4) == 0 &&
                  reinterpret_cast<uintptr_t>(out.data_ptr()) % (wide ? 16 : 4) == 0,
              "cuda::norm_rope: x and out must be ", wide ? 16 : 4, "-byte aligned, got ", x.data_ptr(), " and ", out.data_ptr());
  NormRopeArgs a;
  a.x = reinterpret_cast<const __nv_bfloat16*>(x.data_ptr());
  a.out = reinterpret_cast<__nv_bfloat16*>(out.data_ptr());
  if (in.weight.defined() && in.weight.scalar_type() == at::kFloat) {
    a.norm_weight = in.weight.data_ptr<float>();
  } else if (in.weight.defined()) {
    a.norm_weight_bf16 = reinterpret_cast<const __nv_bfloat16*>(in.weight.data_ptr());
  }
  if (rope) {
    a.cos = in.cos.data_ptr<float>();
    a.sin = in.sin.data_ptr<float>();
  }
  a.rows = T;
  a.heads = static_cast<int>(H);
  a.dim = static_cast<int>(d);
  a.rope_dim = static_cast<int>(r);
  a.norm = in.norm;
  a.eps = static_cast<float>(in.eps);
  const c10::cuda::CUDAGuard guard(x.device());
  check(model::cuda::norm_rope(a, stream_of(x)), "norm_rope");
}

bool compressor_supported(const at::Tensor& paged, const at::Tensor& tail_kv) {
  if (!paged.is_cuda() || paged.scalar_type() != at::kBFloat16 || paged.dim() != 3 || !tail_kv.is_cuda() ||
      tail_kv.scalar_type() != at::kFloat)
    return false;
  const int64_t d = paged.size(2);
  return d >= 2 && d % 2 == 0 && d <= 1024;
}

void compress(const CompressorUpdate& in) {
  TORCH_CHECK(compressor_supported(in.paged, in.tail_kv), "cuda::compress: bfloat16 CUDA paged [blocks, n, d'] (d' even, at most 1024) ",
              "and float32 tails expected, got ", in.paged.scalar_type(), " ", in.paged.sizes(), " and ", in.tail_kv.scalar_type());
  const int64_t B = in.start.numel(), m = in.ratio, c = in.overlap, d = in.paged.size(2);
  const auto is = [](const at::Tensor& t, at::ScalarType type) { return t.defined() && t.scalar_type() == type && t.is_contiguous(); };
  TORCH_CHECK(is(in.kv_rows, at::kFloat) && is(in.score_rows, at::kFloat) && in.kv_rows.dim() == 3 && in.kv_rows.size(0) == B &&
                  in.kv_rows.size(2) == c * d && in.score_rows.sizes() == in.kv_rows.sizes(),
              "cuda::compress: float32 kv_rows and score_rows [", B, ", L, ", c * d, "] expected, got ", in.kv_rows.sizes(), " and ",
              in.score_rows.sizes());
  TORCH_CHECK(is(in.ape, at::kFloat) && in.ape.sizes() == at::IntArrayRef({m, c * d}) && is(in.tail_kv, at::kFloat) &&
                  is(in.tail_score, at::kFloat) && in.tail_kv.dim() == 3 && in.tail_kv.size(1) == c * m && in.tail_kv.size(2) == c * d &&
                  in.tail_score.sizes() == in.tail_kv.sizes(),
              "cuda::compress: float32 ape [", m, ", ", c * d, "] and tails [slots, ", c * m, ", ", c * d, "] expected, got ",
              in.ape.sizes(), " and ", in.tail_kv.sizes());
  TORCH_CHECK((is(in.norm_weight, at::kFloat) || is(in.norm_weight, at::kBFloat16)) && in.norm_weight.numel() == d &&
                  is(in.inv_freq, at::kFloat) && 2 * in.inv_freq.numel() <= d,
              "cuda::compress: norm weight [", d, "] (float32 or bfloat16) and float32 inv_freq expected");
  TORCH_CHECK(is(in.start, at::kLong) && is(in.slots, at::kLong) && in.slots.numel() == B && is(in.block_tables, at::kLong) &&
                  in.block_tables.dim() == 2 && in.block_tables.size(0) == B && in.paged.size(1) * m == 128 && in.paged.is_contiguous(),
              "cuda::compress: int64 start [B], slots [B], block_tables [B, n] and paged [blocks, 128 / ", m, ", d'] expected");
  check_placed("cuda::compress", in.paged.device(),
               {&in.kv_rows, &in.score_rows, &in.ape, &in.norm_weight, &in.inv_freq, &in.tail_kv, &in.tail_score, &in.start, &in.slots,
                &in.block_tables},
               {});
  CompressorArgs a;
  a.kv_rows = in.kv_rows.data_ptr<float>();
  a.score_rows = in.score_rows.data_ptr<float>();
  a.ape = in.ape.data_ptr<float>();
  if (in.norm_weight.scalar_type() == at::kFloat) {
    a.norm_weight = in.norm_weight.data_ptr<float>();
  } else {
    a.norm_weight_bf16 = reinterpret_cast<const __nv_bfloat16*>(in.norm_weight.data_ptr());
  }
  a.inv_freq = in.inv_freq.data_ptr<float>();
  a.tail_kv = in.tail_kv.data_ptr<float>();
  a.tail_score = in.tail_score.data_ptr<float>();
  a.paged = reinterpret_cast<__nv_bfloat16*>(in.paged.data_ptr());
  a.start = in.start.data_ptr<int64_t>();
  a.slots = in.slots.data_ptr<int64_t>();
  a.block_tables = in.block_tables.data_ptr<int64_t>();
  a.num_seqs = B;
  a.len = in.kv_rows.size(1);
  a.block_stride = in.block_tables.size(1);
  a.ratio = static_cast<int>(m);
  a.overlap = static_cast<int>(c);
  a.dim = static_cast<int>(d);
  a.rope_dim = static_cast<int>(2 * in.inv_freq.numel());
  a.eps = static_cast<float>(in.eps);
  const c10::cuda::CUDAGuard guard(in.paged.device());
  check(model::cuda::compress(a, stream_of(in.paged)), "compress");
}

at::Generator make_generator(uint64_t seed, at::Device device) {
  TORCH_CHECK(device.is_cuda(), "cuda::make_generator: ", device, " is not a CUDA device");
  at::Generator gen = at::make_generator<at::CUDAGeneratorImpl>(device.index());
  gen.set_current_seed(seed);
  return gen;
}

// Routed experts straight from packed FP4 (moe_fp4_gemm.h).

bool moe_fp4_supported(at::Device device, int64_t hidden, int64_t intermediate, int64_t experts) {
  if (!device.is_cuda() || !moe_fp4_shape_supported(hidden, intermediate, experts)) return false;
  const int index = device.has_index() ? device.index() : c10::cuda::current_device();
  int major = 0, minor = 0;  // the GEMMs are sm_90a code (wgmma): compute capability 9.0 only
  return cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, index) == cudaSuccess &&
         cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, index) == cudaSuccess && major == 9 && minor == 0;
}

at::Tensor moe_fp4(const MoeFp4& in) {
  const at::Tensor& x = in.x;
  TORCH_CHECK(x.defined(), "cuda::moe_fp4: x is undefined");
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kBFloat16 && x.dim() == 2 && x.is_contiguous(),
              "cuda::moe_fp4: contiguous bfloat16 CUDA x [N, D] expected, got ", x.scalar_type(), " ", x.sizes(), " on ", x.device());
  const int64_t N = x.size(0), D = x.size(1), I = in.intermediate, E = in.w2_packed.numel();
  TORCH_CHECK(moe_fp4_supported(x.device(), D, I, E), "cuda::moe_fp4: D ", D, " and I ", I, " must be multiples of 128 up to 12288 and E ",
              E, " in [1, 1024], on a GPU of compute capability 9.0");
  const auto is = [](const at::Tensor& t, at::ScalarType type) { return t.defined() && t.scalar_type() == type && t.is_contiguous(); };
  TORCH_CHECK(is(in.experts, at::kLong) && in.experts.dim() == 2 && in.experts.size(0) == N && in.experts.size(1) >= 1 &&
                  is(in.routing_weights, at::kFloat) && in.routing_weights.sizes() == in.experts.sizes(),
              "cuda::moe_fp4: int64 experts and float32 routing_weights [", N, ", k >= 1] expected, got ", in.experts.sizes(), " and ",
              in.routing_weights.sizes());
  const int64_t k = in.experts.size(1);
  TORCH_CHECK(N * k < (int64_t{1} << 31), "cuda::moe_fp4: ", N, " x ", k, " pairs are more than the kernels index");
  TORCH_CHECK(is(in.w13_packed, at::kLong) && in.w13_packed.numel() == 2 * E && is(in.w13_scale, at::kLong) &&
                  in.w13_scale.numel() == 2 * E && is(in.w2_packed, at::kLong) && is(in.w2_scale, at::kLong) && in.w2_scale.numel() == E,
              "cuda::moe_fp4: int64 pointer tables w13 [2E], w2 [E] expected, got ", in.w13_packed.numel(), ", ", in.w13_scale.numel(),
              ", ", in.w2_packed.numel(), ", ", in.w2_scale.numel());
  check_placed("cuda::moe_fp4", x.device(),
               {&x, &in.experts, &in.routing_weights, &in.w13_packed, &in.w13_scale, &in.w2_packed, &in.w2_scale}, {&x});
  at::Tensor out = in.per_slot ? at::empty({N, k, D}, x.options().dtype(at::kFloat)) : at::empty({N, D}, x.options().dtype(at::kFloat));
  if (N == 0) return out;
  MoeFp4Args a;
  a.w13_packed = reinterpret_cast<const uint64_t*>(in.w13_packed.data_ptr<int64_t>());
  a.w13_scale = reinterpret_cast<const uint64_t*>(in.w13_scale.data_ptr<int64_t>());
  a.w2_packed = reinterpret_cast<const uint64_t*>(in.w2_packed.data_ptr<int64_t>());
  a.w2_scale = reinterpret_cast<const uint64_t*>(in.w2_scale.data_ptr<int64_t>());
  a.x = reinterpret_cast<const __nv_bfloat16*>(x.data_ptr());
  a.experts = in.experts.data_ptr<int64_t>();
  a.routing_weights = in.routing_weights.data_ptr<float>();
  a.out = out.data_ptr<float>();
  a.tokens = N;
  a.k = k;
  a.hidden = D;
  a.intermediate = I;
  a.first_expert = in.first_expert;
  a.num_experts = E;
  a.swiglu_limit = static_cast<float>(in.swiglu_limit);
  a.per_slot = in.per_slot;
  const c10::cuda::CUDAGuard guard(x.device());
  // The sorted pairs, tile lists, gathered rows, activations and per-pair outputs, from the caching allocator
  // (stream-ordered: freed after the launches, reused only by later work on this stream).
  const at::Tensor workspace = at::empty({static_cast<int64_t>(moe_fp4_workspace_bytes(a))}, x.options().dtype(at::kByte));
  a.workspace = workspace.data_ptr();
  check(model::cuda::moe_fp4(a, stream_of(x)), "moe_fp4");
  return out;
}

}  // namespace deepinfer::model::cuda
