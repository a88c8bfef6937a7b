// Microbenchmark of the paged attention kernel (model/cuda/sparse_attention.h): decode queries
// (one per sequence, every sequence at the same context) of one layer type, timed with CUDA
// events over rotating input sets (together larger than the L2 cache), median of the
// iterations. Bytes counted: each query's keys (window + compressed entries or picks) read
// once, its q and out rows, its picks. FLOPs: 2 x 2 x H x D per key.
//   attention_bench [--batch 64] [--context 32768] [--layer csa|hca|swa|indexer] [--heads 64] [--dim 512]
//                   [--topk 512] [--iters 50] [--hbm-tbps 4.3] [--tflops 790]
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/cuda/kernels.h"
#include "model/attention_group.h"
#include "tests/engine/bench_device.h"
#include "tests/model/bench_util.h"
#include "tests/model/paged_attention_fixture.h"

namespace deepinfer::model::testing {
namespace {

using bench::option;

// --layer indexer: cuda::index_scores over E = context / 4 paged index keys per decode query,
// then cuda::index_topk (k 512) as the forward does, and at::topk beside it for comparison;
// bytes = the keys read once, the scores written, q.
int run_indexer(const AttentionShape& shape, int64_t batch, int64_t context, int64_t iters, double tbps, double tflops, at::Device cuda) {
  std::vector<PagedBatch> sets;
  const int64_t entries = context / shape.ratio;
  const double bytes = static_cast<double>(batch) * (entries * (shape.dim * 2 + 4) + shape.heads * (shape.dim * 2 + 4));
  while (sets.size() < 2 || (bytes * static_cast<double>(sets.size()) < double(int64_t{256} << 20) && sets.size() < 16)) {
    std::vector<uint64_t> seeds(batch);
    for (int64_t b = 0; b < batch; ++b) seeds[b] = (sets.size() + 1) * 100003 + b;
    sets.push_back(make_batch(shape, std::vector<int64_t>(batch, context - 1), 1, seeds, sets.size() + 1, cuda));
  }
  const auto scores_of = [&](const PagedBatch& set) {
    const at::Tensor q = set.in.q.index_select(0, set.in.query_rows).view({batch, 1, shape.heads, shape.dim});
    return cuda::index_scores({.q = q,
                               .weights = (q.select(-1, 0).to(at::kFloat) * 2).contiguous(),
                               .keys = set.in.entries,
                               .start = set.in.start,
                               .block_tables = set.in.block_tables,
                               .first = 0,
                               .entries = entries,
                               .ratio = shape.ratio});
  };
  for (const auto& set : sets) {  // warm-up
    const at::Tensor scores = scores_of(set);
    model::top_entries(scores, 512);
    cuda::index_topk(scores, 512);
  }
  const bool repeatable = at::equal(scores_of(sets[0]), scores_of(sets[0])) &&
                          at::equal(cuda::index_topk(scores_of(sets[0]), 512), cuda::index_topk(scores_of(sets[0]), 512));
  engine::cuda::EventTimeline timeline(cuda);
  std::vector<double> score_ms, topk_ms, aten_topk_ms;
  for (int64_t i = 0; i < iters; ++i) {
    const int64_t a = timeline.record();
    const at::Tensor scores = scores_of(sets[static_cast<size_t>(i) % sets.size()]);
    const int64_t b = timeline.record();
    cuda::index_topk(scores, 512);
    const int64_t c = timeline.record();
    model::top_entries(scores, 512);
    const int64_t d = timeline.record();
    score_ms.push_back(timeline.elapsed_ms(a, b));
    topk_ms.push_back(timeline.elapsed_ms(b, c));
    aten_topk_ms.push_back(timeline.elapsed_ms(c, d));
  }
  for (auto* v : {&score_ms, &topk_ms, &aten_topk_ms}) std::sort(v->begin(), v->end());
  const double median = score_ms[score_ms.size() / 2], gbps = bytes / median / 1e6;
  const double flops = 2.0 * batch * entries * shape.heads * shape.dim;
  std::printf(
      "attention_bench: %s, indexer, batch %ld decode queries at context %ld (%ld entries), H %ld, D %ld, bfloat16, %zu input sets "
      "rotated, %ld iterations after a warm-up: scores median %.4f ms -> %.0f GB/s = %.1f%% of %.2f TB/s, %.2f TFLOP/s = %.1f%% of %.0f; "
      "top-k (k 512): cuda::index_topk %.4f ms, at::topk %.4f ms; repeatable bit for bit: %s\n",
      ::deepinfer::bench::describe_device(cuda).c_str(), long(batch), long(context), long(entries), long(shape.heads), long(shape.dim),
      sets.size(), long(iters), median, gbps, 100.0 * gbps / (tbps * 1e3), tbps, flops / median / 1e9,
      100.0 * flops / median / 1e9 / tflops, tflops, topk_ms[topk_ms.size() / 2], aten_topk_ms[aten_topk_ms.size() / 2],
      repeatable ? "yes" : "NO");
  return repeatable ? 0 : 1;
}

int run(int argc, char** argv) {
  if (!at::hasCUDA()) {
    std::printf("attention_bench: no CUDA device; nothing measured\n");
    return 0;
  }
  const at::Device cuda(at::kCUDA, 0);
  const int64_t batch = std::stoll(option(argc, argv, "batch", "64")), context = std::stoll(option(argc, argv, "context", "32768"));
  const std::string layer = option(argc, argv, "layer", "csa");
  const int64_t iters = std::stoll(option(argc, argv, "iters", "50"));
  const double tbps = std::stod(option(argc, argv, "hbm-tbps", "4.3")), tflops = std::stod(option(argc, argv, "tflops", "790"));
  const bool indexer = layer == "indexer";
  const AttentionShape shape{layer.c_str(),
                             std::stoll(option(argc, argv, "heads", "64")),
                             std::stoll(option(argc, argv, "dim", indexer ? "128" : "512")),
                             128,
                             layer == "csa" || indexer ? 4
                             : layer == "hca"          ? 128
                                                       : 0,
                             layer == "csa" ? std::stoll(option(argc, argv, "topk", "512")) : 0};
  if (indexer) return run_indexer(shape, batch, context, iters, tbps, tflops, cuda);
  // Enough input sets that together they exceed the 50 MB L2 cache several times over.
  std::vector<PagedBatch> sets;
  int64_t set_bytes = 0;
  while (sets.size() < 2 || (set_bytes * static_cast<int64_t>(sets.size()) < (int64_t{256} << 20) && sets.size() < 16)) {
    const uint64_t seed = 1 + sets.size();
    std::vector<uint64_t> seeds(batch);
    for (int64_t b = 0; b < batch; ++b) seeds[b] = seed * 100003 + b;
    sets.push_back(make_batch(shape, std::vector<int64_t>(batch, context - 1), 1, seeds, seed, cuda));
    set_bytes = sets.back().num_keys * shape.dim * 2;
  }
  PagedBatch& first = sets.front();
  const double keys = static_cast<double>(first.num_keys);
  const double bytes = keys * shape.dim * 2 + 2.0 * batch * shape.heads * shape.dim * 2 +
                       (first.in.picks.defined() ? static_cast<double>(first.in.picks.numel()) * 8 : 0.0);
  const double flops = 4.0 * keys * shape.heads * shape.dim;
  for (auto& set : sets) cuda::sparse_attention(set.in, set.out);  // warm-up
  // Deterministic: a second run writes the same bits.
  const at::Tensor again = first.out.index_select(0, first.in.query_rows).clone();
  cuda::sparse_attention(first.in, first.out);
  const bool repeatable = at::equal(again, first.out.index_select(0, first.in.query_rows));
  engine::cuda::EventTimeline timeline(cuda);
  std::vector<double> ms;
  for (int64_t i = 0; i < iters; ++i) {
    PagedBatch& set = sets[static_cast<size_t>(i) % sets.size()];
    const int64_t a = timeline.record();
    cuda::sparse_attention(set.in, set.out);
    const int64_t b = timeline.record();
    ms.push_back(timeline.elapsed_ms(a, b));
  }
  std::sort(ms.begin(), ms.end());
  const double median = ms[ms.size() / 2];
  const double gbps = bytes / median / 1e6, achieved_tflops = flops / median / 1e9;
  std::printf(
      "attention_bench: %s, %s layer, batch %ld decode queries at context %ld, H %ld, D %ld, %.0f keys per query, "
      "bfloat16, %zu input "
      "sets (%.0f MB each) rotated, %ld iterations after a warm-up: median %.4f ms (min %.4f); %.1f MB read+written -> %.0f GB/s = %.1f%% "
      "of %.2f TB/s; %.2f TFLOP/s = %.1f%% of %.0f; repeatable bit for bit: %s\n",
      ::deepinfer::bench::describe_device(cuda).c_str(), layer.c_str(), long(batch), long(context), long(shape.heads), long(shape.dim),
      keys / batch, sets.size(), set_bytes / 1e6, long(iters), median, ms.front(), bytes / 1e6, gbps, 100.0 * gbps / (tbps * 1e3), tbps,
      achieved_tflops, 100.0 * achieved_tflops / tflops, tflops, repeatable ? "yes" : "NO");
  return repeatable ? 0 : 1;
}

}  // namespace
}  // namespace deepinfer::model::testing

int main(int argc, char** argv) { return deepinfer::model::testing::run(argc, argv); }
