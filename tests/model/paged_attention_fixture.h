#pragma once
// Inputs of the paged attention kernel (model/cuda/kernels.h sparse_attention) for tests and the
// microbenchmark: one group of B sequences with L queries each. Each sequence's data (its ring,
// its compressed entries by logical block, its queries and new KV rows, its CSA picks) is drawn
// from its own seed on the device, so the same sequence can be placed in other batches; where
// it lands (its state slot, its block ids, its rows) is shuffled by a layout seed. Also a float64
// reference of one query row, computed on the CPU from the definition (attention_group.h).

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "model/cuda/kernels.h"

namespace deepinfer::model::testing {

struct AttentionShape {
  const char* name;
  int64_t heads, dim, window;
  int64_t ratio;  // 0: window only
  int64_t topk;   // CSA: picks per query; 0: every visible entry (HCA)
};

struct PagedBatch {
  cuda::PagedAttention in;
  at::Tensor out;  // [T, H, D], NaN except where the kernel wrote
  std::vector<int64_t> starts;
  std::vector<int64_t> rows;  // query_rows on the host
  int64_t num_keys = 0;       // keys attended, summed over the queries (window + compressed, picks of -1 excluded)
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Visible entries of a query at position t.
inline int64_t visible_entries(const AttentionShape& s, int64_t t) { return s.ratio > 0 ? (t + 1) / s.ratio : 0; }

// seeds[b] draws sequence b; starts[b] is its run's first position.
inline PagedBatch make_batch(const AttentionShape& s, const std::vector<int64_t>& starts, int64_t len, const std::vector<uint64_t>& seeds,
                             uint64_t layout_seed, at::Device device, int64_t row_offset = 3) {
  const int64_t B = static_cast<int64_t>(starts.size()), H = s.heads, D = s.dim, W = s.window;
  const int64_t T = row_offset + B * len + 2;
  std::mt19937_64 layout(layout_seed);
  std::vector<int64_t> blocks_of(B), group_end(B);
  int64_t total_blocks = 1, max_blocks = 1, max_end = 0;
  for (int64_t b = 0; b < B; ++b) {
    group_end[b] = starts[b] + len;
    blocks_of[b] = ceil_div(group_end[b], 128);
    total_blocks += blocks_of[b];
    max_blocks = std::max(max_blocks, blocks_of[b]);
    max_end = std::max(max_end, group_end[b]);
  }
  total_blocks += 4;  // unused blocks too
  std::vector<int64_t> block_ids(total_blocks - 1), slots(B);
  std::iota(block_ids.begin(), block_ids.end(), 1);
  std::shuffle(block_ids.begin(), block_ids.end(), layout);
  std::iota(slots.begin(), slots.end(), 1);
  std::shuffle(slots.begin(), slots.end(), layout);
  const auto f32 = at::TensorOptions().dtype(at::kFloat).device(device);
  const auto i64 = at::TensorOptions().dtype(at::kLong);
  PagedBatch batch;
  batch.starts = starts;
  at::Generator other = cuda::make_generator(layout_seed + 1, device);
  const auto draw_with = [&](at::Generator& gen, at::IntArrayRef shape) { return at::randn(shape, gen, f32).to(at::kBFloat16); };
  at::Tensor q = draw_with(other, {T, H, D});
  at::Tensor kv = draw_with(other, {T, D});
  at::Tensor ring = draw_with(other, {B + 1, W, D});
  const int64_t per_block = s.ratio > 0 ? 128 / s.ratio : 1;
  at::Tensor entries = draw_with(other, {total_blocks, per_block, D});
  at::Tensor tables = at::zeros({B, max_blocks}, i64);
  const int64_t group_entries = s.ratio > 0 ? max_end / s.ratio : 0;
  const int64_t k = s.topk > 0 ? std::min(s.topk, group_entries) : 0;
  at::Tensor picks = at::full({B * len, std::max<int64_t>(k, 1)}, -1, i64);
  auto pick = picks.accessor<int64_t, 2>();
  auto table = tables.accessor<int64_t, 2>();
  size_t next_block = 0;
  for (int64_t b = 0; b < B; ++b) {
    at::Generator gen = cuda::make_generator(seeds[b], device);
    const auto draw = [&](at::IntArrayRef shape) { return draw_with(gen, shape); };
    ring[slots[b]].copy_(draw({W, D}));
    std::vector<int64_t> rows(len);
    std::iota(rows.begin(), rows.end(), row_offset + b * len);
    batch.rows.insert(batch.rows.end(), rows.begin(), rows.end());
    const at::Tensor row_index = at::tensor(rows, i64).to(device);
    q.index_copy_(0, row_index, draw({len, H, D}));
    kv.index_copy_(0, row_index, draw({len, D}));
    std::vector<int64_t> ids(block_ids.begin() + next_block, block_ids.begin() + next_block + blocks_of[b]);
    next_block += blocks_of[b];
    for (size_t i = 0; i < ids.size(); ++i) table[b][static_cast<int64_t>(i)] = ids[i];
    if (s.ratio > 0) entries.index_copy_(0, at::tensor(ids, i64).to(device), draw({blocks_of[b], per_block, D}));
    std::mt19937_64 pick_rng(seeds[b]);
    for (int64_t l = 0; l < len; ++l) {
      const int64_t t = starts[b] + l, visible = visible_entries(s, t);
      batch.num_keys += std::min(W, t + 1);
      if (k == 0) {
        batch.num_keys += visible;
        continue;
      }
      std::vector<int64_t> order(visible);
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), pick_rng);
      for (int64_t j = 0; j < std::min(k, visible); ++j) pick[b * len + l][j] = order[j];
      batch.num_keys += std::min(k, visible);
    }
  }
  at::Generator sink_gen = at::detail::createCPUGenerator(7);
  batch.in = cuda::PagedAttention{.q = q,
                                  .kv = kv,
                                  .window = ring,
                                  .entries = entries,
                                  .query_rows = at::tensor(batch.rows, i64).to(device),
                                  .start = at::tensor(starts, i64).to(device),
                                  .slots = at::tensor(slots, i64).to(device),
                                  .block_tables = tables.to(device),
                                  .picks = k > 0 ? picks.to(device) : at::Tensor(),
                                  .sink = at::randn({H}, sink_gen).to(device),
                                  .len = len,
                                  .ratio = s.ratio};
  batch.out = at::full({T, H, D}, NAN, f32.dtype(at::kBFloat16));
  return batch;
}

// Host copies of a batch's inputs, for the reference.
struct HostBatch {
  at::Tensor q, kv, ring, entries, tables, picks, sink, slots;
  explicit HostBatch(const PagedBatch& b)
      : q(b.in.q.cpu().to(at::kDouble)),
        kv(b.in.kv.cpu().to(at::kDouble)),
        ring(b.in.window.cpu().to(at::kDouble)),
        entries(b.in.entries.cpu().to(at::kDouble)),
        tables(b.in.block_tables.cpu()),
        picks(b.in.picks.defined() ? b.in.picks.cpu() : at::Tensor()),
        sink(b.in.sink.cpu().to(at::kDouble)),
        slots(b.in.slots.cpu()) {}
};

// Query l of sequence b by the definition, in float64: its keys (the window from the ring and
// the run's rows, the compressed entries through the block table), the sink in the softmax
// denominator, V = K -> [H, D].
inline at::Tensor reference_row(const AttentionShape& s, const PagedBatch& batch, const HostBatch& h, int64_t b, int64_t l) {
  const int64_t len = batch.in.len, W = s.window, start = batch.starts[b], t = start + l;
  std::vector<at::Tensor> keys;
  for (int64_t p = std::max<int64_t>(0, t - W + 1); p <= t; ++p)
    keys.push_back(p < start ? h.ring[h.slots[b].item<int64_t>()][p % W] : h.kv[batch.rows[b * len + (p - start)]]);
  std::vector<int64_t> entries;
  if (h.picks.defined()) {
    for (int64_t j = 0; j < h.picks.size(1); ++j)
      if (h.picks[b * len + l][j].item<int64_t>() >= 0) entries.push_back(h.picks[b * len + l][j].item<int64_t>());
  } else {
    for (int64_t w = 0; w < visible_entries(s, t); ++w) entries.push_back(w);
  }
  for (int64_t w : entries) {
    const int64_t per_block = 128 / s.ratio;
    keys.push_back(h.entries[h.tables[b][w * s.ratio / 128].item<int64_t>()][w % per_block]);
  }
  const at::Tensor K = at::stack(keys);                                                                  // [n, D]
  const at::Tensor scores = at::matmul(h.q[batch.rows[b * len + l]], K.t()) / std::sqrt(double(s.dim));  // [H, n]
  const at::Tensor probs = at::softmax(at::cat({scores, h.sink.unsqueeze(1)}, 1), 1).narrow(1, 0, K.size(0));
  return at::matmul(probs, K);
}

}  // namespace deepinfer::model::testing
