#pragma once
// The model's CUDA kernels as ATen functions: the one seam between the model's device-neutral
// code and the torch-free kernels beside this header (*.cu, raw pointers, cudaError_t).
// kernels.cpp implements it in the CUDA build (DEEPINFER_CUDA=ON; the attention kernels in
// kernels_attention.cpp, the FP8 linears in kernels_fp8.cpp, the invariant linears in
// kernels_linear.cpp, what they share in binding_util.h): shape and dtype checks, the device guard and current stream, a
// cudaError_t turned into an exception naming the kernel.
// kernels_absent.cpp is the CPU build's: built() is false, the *_supported() checks are false
// and the rest throw; a CPU LibTorch has no CUDA tensors, so the model never calls them there.
// Callers choose by the tensor's device at run time; no #if outside model/cuda/.

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

namespace deepinfer::model::cuda {

// Whether this build has the kernels.
bool built();

// mHC Sinkhorn (sinkhorn.h): logits [..., n, n] float32 on CUDA, n in {1, 2, 4, 8}, iters >= 1.
bool sinkhorn_supported(const at::Tensor& logits, int64_t iters);
at::Tensor sinkhorn(const at::Tensor& logits, int64_t iters, double eps);

// FP4 experts to bfloat16 (fp4_dequant.h), one matrix stack: packed [..., rows, cols/2] uint8,
// scale [..., rows, cols/32] uint8 on CUDA, contiguous, cols a multiple of 32, 16-byte aligned.
bool dequant_fp4_supported(const at::Tensor& packed, const at::Tensor& scale, int64_t block, at::ScalarType out_dtype);
at::Tensor dequant_fp4(const at::Tensor& packed, const at::Tensor& scale);  // -> [..., rows, cols] bfloat16

// Many FP4 matrices of one shape into `out` [count, rows, cols] bfloat16: packed_table and
// scale_table int64 [count] device pointers, active int64 [count] (0: matrix m skipped).
void dequant_fp4_tables(const at::Tensor& packed_table, const at::Tensor& scale_table, const at::Tensor& active, at::Tensor& out);

// DeepSeek-V4's attention core read in place from the paged state (sparse_attention.h): for
// one SequenceGroup (B sequences of L queries), q [T, H, D] and kv [T, D] the step's rows,
// window [slots, W, D] the rings as before the step (bfloat16, CUDA, contiguous,
// D in {64, 128, 256, 512}); entries [blocks, 128 / ratio, D] (ratio > 0); query_rows [B L],
// start [B], slots [B], block_tables [B, max_blocks] int64; picks [B L, k] int64 (CSA: entry
// ids, -1 for none) or undefined (HCA: every visible entry); sink [H] float32. Writes
// out[query_rows] of out [T, H, D].
struct PagedAttention {
  at::Tensor q, kv, window, entries, query_rows, start, slots, block_tables, picks, sink;
  int64_t len = 0;              // L
  int64_t ratio = 0;            // m, 0: window only
  int64_t max_entries = 0;      // the most entries any query sees (bounds the scratch), 0: unknown
  bool head_split = false;      // SparseAttentionArgs::head_split (a kernel under test)
  bool picks_are_rows = false;  // picks from index_topk with block_tables: rows of entries [blocks * 128 / ratio]
  bool early_inputs = false;    // SparseAttentionArgs::early_inputs: q and the indices written before the launch before this call
};
bool sparse_attention_supported(const at::Tensor& q, const at::Tensor& window);
void sparse_attention(const PagedAttention& in, at::Tensor& out);
// Whether sparse_attention(in, ...) runs the head-split kernel: in.head_split set, and a call it
// takes (sm90_heads_attention_supported: Hopper, D 512, 33..64 heads, CSA or the window alone,
// at most 640 keys a row).
bool sparse_attention_runs_head_split(const PagedAttention& in);
// Whether sparse_attention(in, ...) runs the Hopper split kernel (sm90_attention_supported: Hopper,
// D 512, 33..64 heads; not the head-split kernel), the one that honours in.early_inputs.
bool sparse_attention_runs_split_sm90(const PagedAttention& in);

// CSA's indexer scores read in place from the paged index keys (index_scores.h): q [B, L, H, D]
// bfloat16 (H <= 64, D in {32, 64, 128}) and weights [B, L, H] float32 of queries first ..
// first + L - 1 of each run, keys [blocks, 128 / ratio, D] bfloat16, start [B] and block_tables
// [B, n] int64 -> [B, L, entries] float32, -inf where an entry is not visible to the query.
struct PagedIndexScores {
  at::Tensor q, weights, keys, start, block_tables;
  int64_t first = 0;
  int64_t entries = 0;
  int64_t ratio = 0;
};
bool index_scores_supported(const at::Tensor& q, const at::Tensor& keys);
at::Tensor index_scores(const PagedIndexScores& in);

// CSA's pick (index_topk.h): scores [..., E] float32 on CUDA, contiguous -> [..., k] int64, the
// top k entries of each row in ascending entry order (of equal scores the lower entry wins), -1
// past the row's visible (> -inf) entries. With block_tables [B, n] int64 (scores [B, L, E]) and
// the layer's ratio, the picks are the entries' rows of the paged state instead of their ids
// (PagedAttention::picks_are_rows).
at::Tensor index_topk(const at::Tensor& scores, int64_t k, const at::Tensor& block_tables = {}, int64_t ratio = 0);

// The KV compressor's update of one group in place (compressor.h): kv_rows and score_rows
// [B, L, c d'] float32 (the run's projections; score without ape), ape [m, c d'] float32,
// norm_weight [d'] float32 or bfloat16, inv_freq [r / 2] float32, tail_kv and tail_score
// [slots, c m, c d'] float32, paged [blocks, 128 / m, d'] bfloat16, start and slots [B],
// block_tables [B, n] int64; all CUDA and contiguous.
struct CompressorUpdate {
  at::Tensor kv_rows, score_rows, ape, norm_weight, inv_freq, tail_kv, tail_score, paged, start, slots, block_tables;
  int64_t ratio = 0;
  int64_t overlap = 1;
  double eps = 0;
};
bool compressor_supported(const at::Tensor& paged, const at::Tensor& tail_kv);
void compress(const CompressorUpdate& in);

// mHC around a sub-block (hyper_connection.h): streams [T, n, D] bfloat16 on CUDA, contiguous,
// n in {1, 2, 4, 8}, D even and at most 16384.
bool hc_supported(const at::Tensor& streams);
// raw [T, (2 + n) n] float32 = the float32 streams times fn^T; scale [3] and base [(2 + n) n]
// float32; norm_weight [D] float32 or bfloat16 -> the sub-block's input [T, D] bfloat16 (the
// normed collapse), post [T, n] and comb [T, n, n] float32.
struct HcPre {
  at::Tensor streams, raw, scale, base, norm_weight;
  int64_t iters = 0;
  double rms_eps = 0, hc_eps = 0;
};
struct HcPreOut {
  at::Tensor input, post, comb;
};
HcPreOut hc_pre(const HcPre& in);
// y [T, D] bfloat16 -> the new streams [T, n, D] bfloat16.
at::Tensor hc_post(const at::Tensor& streams, const at::Tensor& y, const at::Tensor& post, const at::Tensor& comb);

// The attention projections' RMSNorm and RoPE in one kernel (rope.h): x [T, H, d] or [T, d]
// bfloat16 on CUDA, contiguous, d even. norm: RMSNorm of each head vector over d with eps and
// `weight` [d] (float32 or bfloat16; undefined: no weight), rounded to bfloat16 as rms_norm().
// cos and sin: RopeAngles' float32 tables [T, r / 2, 2] (RopeAngles::cos_table, sin_table;
// undefined: no RoPE), the last r channels rotated with the bits of RopeAngles::apply. Writes
// out like x, which may be x itself (in place). With d and r multiples of 8, x and out must be
// 16-byte aligned (else 4-byte; fresh tensors are).
struct NormRope {
  at::Tensor x, weight, cos, sin;
  bool norm = false;
  double eps = 0;
};
bool norm_rope_supported(const at::Tensor& x);
void norm_rope(const NormRope& in, at::Tensor& out);

// A random generator on a CUDA device (the GPU's Philox), seeded.
at::Generator make_generator(uint64_t seed, at::Device device);

}  // namespace deepinfer::model::cuda

// Routed experts straight from packed FP4 (moe_fp4_gemm.h): one layer's owned experts
// [first_expert, first_expert + E) as int64 device-pointer tables (w13_packed / w13_scale [2E]:
// expert e's w1 at 2 e, its w3 at 2 e + 1, each [I, D / 2] / [I, D / 32] uint8, 16-byte aligned;
// w2_packed / w2_scale [E]: [D, I / 2] / [D, I / 32]), E at most 1,024; x [N, D] bfloat16,
// experts [N, k] int64, routing_weights [N, k] float32 -> [N, D] float32: each token's pairs of
// owned experts, summed in slot order. No host read.
namespace deepinfer::model::cuda {

struct MoeFp4 {
  at::Tensor w13_packed, w13_scale, w2_packed, w2_scale;
  at::Tensor x, experts, routing_weights;
  int64_t first_expert = 0;
  int64_t intermediate = 0;  // I
  double swiglu_limit = 0;   // <= 0: no clamp
  bool per_slot = false;     // -> [N, k, D]: each pair's weighted output, 0 for experts not owned (moe_fp4_gemm.h)
};
// CUDA build, a CUDA device of sm_80 or later, D and I multiples of 128 up to 12,288, E from 1
// to 1,024.
bool moe_fp4_supported(at::Device device, int64_t hidden, int64_t intermediate, int64_t experts);
at::Tensor moe_fp4(const MoeFp4& in);

}  // namespace deepinfer::model::cuda

// FP8 linears straight from FP8 (act_quant.h, fp8_gemm.h): y = x W^T with W's e4m3 bytes and its
// 128 x 128 float32 block scales as loaded (no bfloat16 copy), x quantized on the fly to e4m3 with
// one power-of-two float32 scale per row and 128 columns (DeepSeek-V4's act_quant, quant.h
// quantize_fp8_activations), multiplied by cuBLASLt's block-scaled FP8 GEMM (Hopper only).
namespace deepinfer::model::cuda {

// x [..., K] bfloat16 on CUDA, K a multiple of 4 -> the bits of quantize_fp8_activations(x).
// Rows are independent.
struct Fp8Activations {
  at::Tensor codes;   // [..., K] uint8 e4m3: the first M rows of a [M4, K] buffer (M4 = M rounded up to 4, rows past M zero)
  at::Tensor scales;  // [..., ceil(K/128)] float32 with strides (..., 1, M4): a view of the [ceil(K/128), M4] buffer cuBLASLt reads
};
bool act_quant_supported(const at::Tensor& x);
Fp8Activations act_quant(const at::Tensor& x);

// x [..., K] bfloat16, w_fp8 [N, K] uint8 (the e4m3 bytes; LibTorch 1.13 has no float8 dtype),
// contiguous and 16-byte aligned, w_scale [ceil(N/128), ceil(K/128)] float32 (the checkpoint's
// e8m0 bytes decoded, 2^(s - 127)), on one CUDA device of compute capability 9.0 with cuBLASLt
// 12.9 or later; K a multiple of 16, N of 8.
bool fp8_linear_supported(const at::Tensor& x, const at::Tensor& w_fp8, const at::Tensor& w_scale);
// -> [..., N] bfloat16: x quantized by act_quant, times the dequantized W, summed in float32 per
// 128-column block (fp8_gemm.h), rounded to bfloat16 once. No host sync. Throws naming the shape
// where cuBLASLt has no algorithm for it.
at::Tensor fp8_linear(const at::Tensor& x, const at::Tensor& w_fp8, const at::Tensor& w_scale);

}  // namespace deepinfer::model::cuda

// Batch-invariant dense linears (dense_gemm.h): y = x w^T with x [..., K] and w [N, K] on one
// CUDA device -> [..., N] in out_dtype. Every output element is computed with the same
// instructions in the same order whatever the rows around it, so a row's bits do not depend on
// the batch. bfloat16 x and w (K a multiple of 32, sm_80 or later; tensor cores, float32 sums)
// give bfloat16 or float32; float32 x and w (K a multiple of 4; CUDA cores) give float32.
// w: unit inner stride, row stride a multiple of 8 (bfloat16) or 4 (float32) elements, 16-byte
// aligned (any contiguous weight); x is copied to a contiguous tensor where its layout does not fit.
namespace deepinfer::model::cuda {

bool invariant_linear_supported(const at::Tensor& x, const at::Tensor& w);
at::Tensor invariant_linear(const at::Tensor& x, const at::Tensor& w, at::ScalarType out_dtype);
// The grouped form: x [T, G, K] bfloat16, w [G, N, K] -> [T, G N], group g's columns [g N, (g + 1) N)
// (x[:, g] times w[g]^T), every group in one launch with invariant_linear()'s per-element arithmetic.
at::Tensor invariant_group_linear(const at::Tensor& x, const at::Tensor& w);
// The tile configuration the kernels pick for `rows` rows of x against w (for benchmarks; the
// choice never changes a bit of the result).
std::string invariant_linear_plan(int64_t rows, const at::Tensor& w);

}  // namespace deepinfer::model::cuda
