#include "model/compressor.h"

#include <limits>

#include "model/cuda/kernels.h"

namespace deepinfer::model {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Per sequence, the rows the compressor can see: its stored tail followed by this run's rows,
// pool [B, c m + L, c d']. RowSource maps absolute positions to pool rows.
struct RowSource {
  at::Tensor kv;     // [B, c m + L, c d'] float32
  at::Tensor score;  // [B, c m + L, c d'] float32 (ape included)
  int64_t ratio, overlap, len;

  // q: positions [B, ...], p: first positions broadcastable to q -> (pool row, row is real).
  // Tail rows: HCA row q % m; CSA rows m + q % m for the open window, q % m for the one before.
  std::pair<at::Tensor, at::Tensor> locate(const at::Tensor& q, const at::Tensor& p) const {
    const int64_t m = ratio, c = overlap;
    const at::Tensor in_run = q >= p;
    at::Tensor from_tail;
    if (c == 1) {
      from_tail = at::remainder(q, m);  // the open window: row q % m
    } else {
      const at::Tensor open_start = at::div(p, m, "floor") * m;  // rows m.. hold the open window, 0..m-1 the previous one
      from_tail = at::where(q >= open_start, m + at::remainder(q, m), at::remainder(q, m));
    }
    const at::Tensor index = at::where(in_run, c * m + q - p, from_tail).clamp(0, c * m + len - 1);
    const at::Tensor real = (q >= 0) & (q < p + len);
    return {index, real};
  }

  // Gathers rows at positions q [B, K, S] -> kv, score [B, K, S, c d']; unreal rows get 0 / -inf.
  std::pair<at::Tensor, at::Tensor> gather(const at::Tensor& q, const at::Tensor& p) const {
    auto [index, real] = locate(q, p);
    const int64_t B = kv.size(0), rows = kv.size(1), width = kv.size(2);
    const at::Tensor flat = (index + at::arange(B, index.options()).view({B, 1, 1}) * rows).reshape(-1);
    std::vector<int64_t> shape(q.sizes().begin(), q.sizes().end());
    shape.push_back(width);
    at::Tensor out_kv = kv.reshape({B * rows, width}).index_select(0, flat).view(shape);
    at::Tensor out_score = score.reshape({B * rows, width}).index_select(0, flat).view(shape);
    const at::Tensor keep = real.unsqueeze(-1);
    return {out_kv.masked_fill(~keep, 0.0), out_score.masked_fill(~keep, kNegInf)};
  }
};

}  // namespace

void compress_group(const ModelWeights& weights, const CompressorSpec& spec, const SequenceGroup& group, const at::Tensor& x,
                    const Rope& rope, CompressorTail& tail, at::Tensor& paged, const Arithmetic& arith, const ForwardHooks* hooks) {
  const int64_t B = group.num_seqs, L = group.len, m = spec.ratio, c = spec.overlap, d = spec.dim;
  const auto i64 = group.start.options();
  // Projected rows of this run; scores carry the position bias of their slot in the window.
  const at::Tensor kv_rows = arith.linear(x, weights.get(spec.prefix + "wkv.weight")).to(at::kFloat);  // [B, L, c d']
  const at::Tensor ape = weights.get(spec.prefix + "ape");                                             // [m, c d'] float32
  if (arith.compresses_in_place(paged, tail.kv) && !observing(hooks)) {  // one pass on the device (the tap needs the ATen path)
    cuda::compress({.kv_rows = kv_rows,
                    .score_rows = arith.linear(x, weights.get(spec.prefix + "wgate.weight")).to(at::kFloat),
                    .ape = ape,
                    .norm_weight = weights.get(spec.prefix + "norm.weight"),
                    .inv_freq = rope.inv_freq(),
                    .tail_kv = tail.kv,
                    .tail_score = tail.score,
                    .paged = paged,
                    .start = group.start,
                    .slots = group.slots,
                    .block_tables = group.block_tables.contiguous(),
                    .ratio = m,
                    .overlap = c,
                    .eps = weights.config().rms_norm_eps});
    return;
  }
  const at::Tensor score_rows = arith.linear(x, weights.get(spec.prefix + "wgate.weight")).to(at::kFloat) +
                                ape.index_select(0, at::remainder(group.positions, m).reshape(-1)).view({B, L, c * d});
  RowSource source{at::cat({tail.kv.index_select(0, group.slots), kv_rows}, 1),
                   at::cat({tail.score.index_select(0, group.slots), score_rows}, 1), m, c, L};
  const at::Tensor p = group.start.view({B, 1, 1});
  const at::Tensor slot_offsets = at::arange(m, i64).view({1, 1, m});

  // Candidate windows w = p/m + k, k < ceil(L/m); real if complete within the run.
  const int64_t K = (L + m - 1) / m;
  const at::Tensor w = at::div(group.start, m, "floor").unsqueeze(1) + at::arange(K, i64).unsqueeze(0);  // [B, K]
  const at::Tensor complete = w < at::div(group.start + L, m, "floor").unsqueeze(1);
  auto [kv, score] = source.gather(w.unsqueeze(-1) * m + slot_offsets, p);  // current window rows [B, K, m, c d']
  if (c == 2) {
    auto [kv_prev, score_prev] = source.gather((w.unsqueeze(-1) - 1) * m + slot_offsets, p);
    kv = at::cat({kv_prev.narrow(-1, 0, d), kv.narrow(-1, d, d)}, 2);  // [B, K, 2m, d']
    score = at::cat({score_prev.narrow(-1, 0, d), score.narrow(-1, d, d)}, 2);
  }
  at::Tensor compressed = arith.pool_windows(kv, score, x.scalar_type());  // [B, K, d']
  compressed = at::where(complete.unsqueeze(-1), compressed, at::zeros_like(compressed));
  const at::Tensor normed = arith.rms_norm(compressed, weights.get(spec.prefix + "norm.weight"), weights.config().rms_norm_eps);
  const at::Tensor entries = rope.angles(w * m, arith.rope_table_dtype(normed.scalar_type())).apply(normed);
  if (observing(hooks)) hooks->observe(spec.prefix + "entries", entries);

  // Paged write: entry w -> block table[(w m) / 128], row w % (128 / m); incomplete -> padding block 0.
  const int64_t per_block = kBlockTokens / m;
  const at::Tensor column = at::div(w * m, kBlockTokens, "floor").clamp(0, group.block_tables.size(1) - 1);
  const at::Tensor block = at::where(complete, group.block_tables.gather(1, column), at::zeros_like(w));
  const at::Tensor row = at::where(complete, at::remainder(w, per_block), at::zeros_like(w));
  paged.index_put_({block.reshape(-1), row.reshape(-1)}, entries.reshape({B * K, d}).to(paged.scalar_type()));

  // New tail: the open window after the run (and, for CSA, the complete window before it).
  const at::Tensor open = at::div(group.start + L, m, "floor").view({B, 1, 1}) * m + slot_offsets;  // [B, 1, m]
  auto [tail_kv, tail_score] = source.gather(open, p);
  if (c == 2) {
    auto [prev_kv, prev_score] = source.gather(open - m, p);
    tail_kv = at::cat({prev_kv, tail_kv}, 2);
    tail_score = at::cat({prev_score, tail_score}, 2);
  }
  tail.kv.index_put_({group.slots}, tail_kv.view({B, c * m, c * d}));
  tail.score.index_put_({group.slots}, tail_score.view({B, c * m, c * d}));
}

}  // namespace deepinfer::model
