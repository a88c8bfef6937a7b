// The CUDA build's ATen bindings of model/cuda/kernels.h's attention kernels: the paged sparse
// attention (sparse_attention.h, the Hopper kernels behind it), the indexer's scores
// (index_scores.h) and its top k (index_topk.h); the rest of kernels.h is implemented by
// kernels.cpp, kernels_fp8.cpp and kernels_linear.cpp.
#include <c10/cuda/CUDAGuard.h>

#include <cmath>
#include <vector>

#include "model/cuda/binding_util.h"
#include "model/cuda/index_scores.h"
#include "model/cuda/index_topk.h"
#include "model/cuda/kernels.h"
#include "model/cuda/sparse_attention.h"
#include "model/cuda/sparse_attention_heads.h"
#include "model/cuda/sparse_attention_sm90.h"

namespace deepinfer::model::cuda {

using namespace binding;  // check, check_placed, stream_of, aligned16, tensor_cores_on

bool sparse_attention_supported(const at::Tensor& q, const at::Tensor& window) {
  const int64_t d = q.dim() == 3 ? q.size(2) : 0;
  return q.is_cuda() && q.scalar_type() == at::kBFloat16 && window.scalar_type() == at::kBFloat16 && window.dim() == 3 &&
         window.size(2) == d && (d == 64 || d == 128 || d == 256 || d == 512) && tensor_cores_on(q.device());
}

void sparse_attention(const PagedAttention& in, at::Tensor& out) {
  TORCH_CHECK(sparse_attention_supported(in.q, in.window),
              "cuda::sparse_attention: bfloat16 CUDA q [T, H, D] and window [slots, W, D] with D "
              "in {64, 128, 256, 512} expected, got ",
              in.q.scalar_type(), " ", in.q.sizes(), " and ", in.window.scalar_type(), " ", in.window.sizes());
  const int64_t T = in.q.size(0), H = in.q.size(1), D = in.q.size(2), B = in.start.numel();
  const auto is = [](const at::Tensor& t, at::ScalarType type) {
    return t.defined() && t.scalar_type() == type && t.is_contiguous() && t.is_cuda();
  };
  TORCH_CHECK(is(in.q, at::kBFloat16) && is(in.kv, at::kBFloat16) && is(in.window, at::kBFloat16) && is(out, at::kBFloat16) &&
                  in.kv.sizes() == at::IntArrayRef({T, D}) && out.sizes() == in.q.sizes(),
              "cuda::sparse_attention: contiguous q [T, H, D], kv [T, D], out like q expected, got ", in.q.sizes(), ", ", in.kv.sizes(),
              ", ", out.sizes());
  TORCH_CHECK(is(in.query_rows, at::kLong) && is(in.start, at::kLong) && is(in.slots, at::kLong) && is(in.block_tables, at::kLong) &&
                  in.query_rows.numel() == B * in.len && in.slots.numel() == B && in.block_tables.dim() == 2 &&
                  in.block_tables.size(0) == B,
              "cuda::sparse_attention: int64 query_rows [B L], start [B], slots [B], block_tables [B, n] expected");
  TORCH_CHECK(is(in.sink, at::kFloat) && in.sink.numel() == H, "cuda::sparse_attention: float32 sink [", H, "] expected");
  TORCH_CHECK(in.ratio == 0 || (is(in.entries, at::kBFloat16) && in.entries.dim() == 3 && in.entries.size(1) * in.ratio == 128 &&
                                in.entries.size(2) == D),
              "cuda::sparse_attention: entries [blocks, 128 / ", in.ratio, ", ", D, "] bfloat16 expected");
  TORCH_CHECK(
      !in.picks.defined() || (is(in.picks, at::kLong) && in.picks.dim() == 2 && in.picks.size(0) == B * in.len && in.picks.size(1) >= 1),
      "cuda::sparse_attention: int64 picks [B L, k >= 1] expected");
  TORCH_CHECK(in.max_entries >= 0, "cuda::sparse_attention: max_entries must not be negative, got ", in.max_entries);
  check_placed("cuda::sparse_attention", in.q.device(),
               {&in.q, &in.kv, &in.window, &in.entries, &in.query_rows, &in.start, &in.slots, &in.block_tables, &in.picks, &in.sink, &out},
               {&in.q, &in.kv, &in.window, &in.entries});
  SparseAttentionArgs a;
  a.q = reinterpret_cast<const __nv_bfloat16*>(in.q.data_ptr());
  a.kv = reinterpret_cast<const __nv_bfloat16*>(in.kv.data_ptr());
  a.ring = reinterpret_cast<const __nv_bfloat16*>(in.window.data_ptr());
  a.entries = in.ratio > 0 ? reinterpret_cast<const __nv_bfloat16*>(in.entries.data_ptr()) : nullptr;
  a.query_rows = in.query_rows.data_ptr<int64_t>();
  a.start = in.start.data_ptr<int64_t>();
  a.slots = in.slots.data_ptr<int64_t>();
  a.block_tables = in.block_tables.data_ptr<int64_t>();
  a.picks = in.picks.defined() ? in.picks.data_ptr<int64_t>() : nullptr;
  a.sink = in.sink.data_ptr<float>();
  a.out = reinterpret_cast<__nv_bfloat16*>(out.data_ptr());
  a.num_seqs = B;
  a.len = in.len;
  a.block_stride = in.block_tables.size(1);
  a.num_picks = in.picks.defined() ? in.picks.size(1) : 0;
  a.picks_are_rows = in.picks_are_rows;
  a.heads = static_cast<int>(H);
  a.head_dim = static_cast<int>(D);
  a.window = static_cast<int>(in.window.size(1));
  a.ratio = static_cast<int>(in.ratio);
  a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  a.max_entries = in.max_entries;
  a.q_rows = in.q.size(0);
  a.head_split = in.head_split;
  a.early_inputs = in.early_inputs;
  const c10::cuda::CUDAGuard guard(in.q.device());
  at::Tensor workspace;  // the split rows' partial outputs, from the caching allocator
  if (const size_t bytes = sparse_attention_workspace_bytes(a); bytes > 0) {
    workspace = at::empty({static_cast<int64_t>(bytes / sizeof(float))}, in.q.options().dtype(at::kFloat));
    a.workspace = workspace.data_ptr<float>();
  }
  check(model::cuda::sparse_attention(a, stream_of(in.q)), "sparse_attention");
}

bool sparse_attention_runs_head_split(const PagedAttention& in) {
  SparseAttentionArgs a;  // what sm90_heads_attention_supported reads
  a.heads = static_cast<int>(in.q.size(1));
  a.head_dim = static_cast<int>(in.q.size(2));
  a.window = static_cast<int>(in.window.size(1));
  a.ratio = static_cast<int>(in.ratio);
  a.picks = in.picks.defined() ? in.picks.data_ptr<int64_t>() : nullptr;
  a.num_picks = in.picks.defined() ? in.picks.size(1) : 0;
  return in.head_split && sm90_heads_attention_supported(a);
}

bool sparse_attention_runs_split_sm90(const PagedAttention& in) {
  SparseAttentionArgs a;  // what sm90_attention_supported reads
  a.heads = static_cast<int>(in.q.size(1));
  a.head_dim = static_cast<int>(in.q.size(2));
  const c10::cuda::CUDAGuard guard(in.q.device());  // it asks the current device
  return !sparse_attention_runs_head_split(in) && sm90_attention_supported(a);
}

bool index_scores_supported(const at::Tensor& q, const at::Tensor& keys) {
  const int64_t d = q.dim() == 4 ? q.size(3) : 0;
  return q.is_cuda() && q.scalar_type() == at::kBFloat16 && keys.scalar_type() == at::kBFloat16 && keys.dim() == 3 && keys.size(2) == d &&
         q.size(2) <= 64 && (d == 32 || d == 64 || d == 128) && tensor_cores_on(q.device());
}

at::Tensor index_scores(const PagedIndexScores& in) {
  TORCH_CHECK(index_scores_supported(in.q, in.keys),
              "cuda::index_scores: bfloat16 CUDA q [B, L, H <= 64, D] and keys [blocks, n, D] with D "
              "in {32, 64, 128} expected, got ",
              in.q.scalar_type(), " ", in.q.sizes(), " and ", in.keys.scalar_type(), " ", in.keys.sizes());
  const int64_t B = in.q.size(0), L = in.q.size(1), H = in.q.size(2);
  const auto is = [](const at::Tensor& t, at::ScalarType type) {
    return t.defined() && t.scalar_type() == type && t.is_contiguous() && t.is_cuda();
  };
  TORCH_CHECK(is(in.q, at::kBFloat16) && is(in.keys, at::kBFloat16) && is(in.weights, at::kFloat) &&
                  in.weights.sizes() == at::IntArrayRef({B, L, H}),
              "cuda::index_scores: contiguous q, keys and float32 weights [B, L, H] expected, got weights ", in.weights.sizes());
  TORCH_CHECK(is(in.start, at::kLong) && in.start.numel() == B && is(in.block_tables, at::kLong) && in.block_tables.dim() == 2 &&
                  in.block_tables.size(0) == B && in.ratio > 0 && in.keys.size(1) * in.ratio == 128,
              "cuda::index_scores: int64 start [B], block_tables [B, n] and keys [blocks, 128 / ", in.ratio, ", D] expected");
  check_placed("cuda::index_scores", in.q.device(), {&in.q, &in.weights, &in.keys, &in.start, &in.block_tables}, {&in.q, &in.keys});
  at::Tensor scores = at::empty({B, L, in.entries}, in.q.options().dtype(at::kFloat));
  IndexScoresArgs a;
  a.q = reinterpret_cast<const __nv_bfloat16*>(in.q.data_ptr());
  a.weights = in.weights.data_ptr<float>();
  a.keys = reinterpret_cast<const __nv_bfloat16*>(in.keys.data_ptr());
  a.start = in.start.data_ptr<int64_t>();
  a.block_tables = in.block_tables.data_ptr<int64_t>();
  a.scores = scores.data_ptr<float>();
  a.num_seqs = B;
  a.len = L;
  a.first = in.first;
  a.entries = in.entries;
  a.block_stride = in.block_tables.size(1);
  a.heads = static_cast<int>(H);
  a.dim = static_cast<int>(in.q.size(3));
  a.ratio = static_cast<int>(in.ratio);
  const c10::cuda::CUDAGuard guard(in.q.device());
  check(model::cuda::index_scores(a, stream_of(in.q)), "index_scores");
  return scores;
}

at::Tensor index_topk(const at::Tensor& scores, int64_t k, const at::Tensor& block_tables, int64_t ratio) {
  TORCH_CHECK(scores.is_cuda() && scores.scalar_type() == at::kFloat && scores.dim() >= 1 && scores.is_contiguous() && k >= 1,
              "cuda::index_topk: contiguous float32 CUDA scores [..., E] and k >= 1 expected, got ", scores.scalar_type(), " ",
              scores.sizes(), " on ", scores.device(), ", k ", k);
  std::vector<int64_t> sizes(scores.sizes().begin(), scores.sizes().end());
  const int64_t entries = sizes.back();
  sizes.back() = k;
  at::Tensor picks = at::empty(sizes, scores.options().dtype(at::kLong));
  IndexTopkArgs a;
  a.scores = scores.data_ptr<float>();
  a.picks = picks.data_ptr<int64_t>();
  a.rows = entries > 0 ? scores.numel() / entries : picks.numel() / k;
  a.entries = entries;
  a.k = k;
  if (block_tables.defined()) {
    TORCH_CHECK(scores.dim() == 3 && block_tables.is_cuda() && block_tables.scalar_type() == at::kLong && block_tables.dim() == 2 &&
                    block_tables.is_contiguous() && block_tables.size(0) == scores.size(0) && ratio > 0 && 128 % ratio == 0 &&
                    block_tables.size(1) * (128 / ratio) >= entries,
                "cuda::index_topk: scores [B, L, E] with contiguous int64 CUDA block_tables [B, >= E m / 128] and a ratio m dividing 128 "
                "expected, got scores ",
                scores.sizes(), ", block_tables ", block_tables.sizes(), ", ratio ", ratio);
    a.block_tables = block_tables.data_ptr<int64_t>();
    a.block_stride = block_tables.size(1);
    a.rows_per_seq = scores.size(1);
    a.ratio = static_cast<int>(ratio);
  }
  const c10::cuda::CUDAGuard guard(scores.device());
  check(model::cuda::index_topk(a, stream_of(scores)), "index_topk");
  return picks;
}

}  // namespace deepinfer::model::cuda
