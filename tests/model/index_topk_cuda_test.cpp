// The indexer's top-k kernel (model/cuda/index_topk.h) on the GPU (label cuda; each test skips
// with a message without one):
//  - against the definition (a stable descending sort: of equal scores the lower entry first;
//    the first k that are > -inf, then in ascending entry order, -1 after) over many shapes:
//    k larger and smaller than the visible entries, rows with nothing visible, heavy ties
//    (scores on a coarse grid), -0.0 next to 0.0, entries from 1 to 100,000;
//  - batch invariance: a row's picks are the same alone and inside batches of 2..256 other rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "model/cuda/kernels.h"

namespace deepinfer::model::testing {
namespace {

// The definition, on the host: [rows, E] float32 -> [rows, k] int64.
at::Tensor reference_topk(const at::Tensor& scores, int64_t k) {
  const at::Tensor host = scores.cpu().contiguous();
  const int64_t rows = host.size(0), entries = host.size(1);
  at::Tensor picks = at::full({rows, k}, -1, at::kLong);
  for (int64_t r = 0; r < rows; ++r) {
    const float* s = host.data_ptr<float>() + r * entries;
    std::vector<int64_t> order(static_cast<size_t>(entries));
    for (int64_t e = 0; e < entries; ++e) order[static_cast<size_t>(e)] = e;
    std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return s[x] > s[y]; });  // -0.0 == 0.0
    std::vector<int64_t> top;
    for (int64_t e : order) {
      if (static_cast<int64_t>(top.size()) == k || s[e] == -INFINITY) break;
      top.push_back(e);
    }
    std::sort(top.begin(), top.end());
    for (size_t j = 0; j < top.size(); ++j) picks[r][static_cast<int64_t>(j)] = top[j];
  }
  return picks;
}

enum class Kind { kNormal, kTied, kSignedZeros };

// Row r: its first visible[r] entries scored, the rest -inf.
at::Tensor make_scores(int64_t rows, int64_t entries, Kind kind, const std::vector<int64_t>& visible, uint64_t seed) {
  at::Tensor s = at::empty({rows, entries}, at::kFloat);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> grid(-3, 3);
  float* p = s.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t e = 0; e < entries; ++e) {
      float v = 0;
      switch (kind) {
        case Kind::kNormal: v = normal(rng); break;
        case Kind::kTied: v = 0.5f * static_cast<float>(grid(rng)); break;
        case Kind::kSignedZeros: v = (rng() % 2 != 0) ? -0.0f : (rng() % 4 == 0 ? 0.0f : normal(rng)); break;
      }
      p[r * entries + e] = e < visible[static_cast<size_t>(r)] ? v : -INFINITY;
    }
  }
  return s;
}

TEST(IndexTopkCuda, MatchesTheDefinition) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: the kernel runs only on CUDA";
  const at::Device cuda(at::kCUDA, 0);
  struct Shape {
    int64_t rows, entries, k;
  };
  const std::vector<Shape> shapes{{1, 1, 1},     {3, 5, 4},       {7, 511, 512},     {7, 513, 512}, {16, 4096, 512},
                                  {4, 8192, 16}, {2, 32768, 512}, {2, 100000, 2048}, {33, 700, 1},  {5, 2000, 1999}};
  uint64_t seed = 1;
  int checked = 0;
  for (const Shape& shape : shapes) {
    for (Kind kind : {Kind::kNormal, Kind::kTied, Kind::kSignedZeros}) {
      std::mt19937_64 rng(seed);
      std::vector<int64_t> visible(static_cast<size_t>(shape.rows));
      for (size_t r = 0; r < visible.size(); ++r) {
        // Everything, nothing, around k, or anything.
        switch (r % 4) {
          case 0: visible[r] = shape.entries; break;
          case 1: visible[r] = r == 1 ? 0 : static_cast<int64_t>(rng() % (shape.entries + 1)); break;
          case 2: visible[r] = std::min(shape.entries, shape.k + static_cast<int64_t>(rng() % 3) - 1); break;
          default: visible[r] = static_cast<int64_t>(rng() % (shape.entries + 1)); break;
        }
        visible[r] = std::max<int64_t>(visible[r], 0);
      }
      const at::Tensor scores = make_scores(shape.rows, shape.entries, kind, visible, seed++);
      const at::Tensor got = cuda::index_topk(scores.to(cuda), shape.k).cpu();
      const at::Tensor expected = reference_topk(scores, shape.k);
      ASSERT_EQ(got.sizes(), expected.sizes());
      for (int64_t r = 0; r < shape.rows; ++r) {
        EXPECT_TRUE(at::equal(got[r], expected[r]))
            << shape.rows << " x " << shape.entries << ", k " << shape.k << ", kind " << static_cast<int>(kind) << ": row " << r << " ("
            << visible[static_cast<size_t>(r)] << " visible) differs";
      }
      ++checked;
    }
  }
  std::printf("[index_topk] %d score sets checked against the stable-sort definition\n", checked);
}

// With a block table, every pick is its entry's row of the paged state, in the same order, and
// -1 stays -1: against the definition's ids mapped on the host, over ratios, ragged visibility,
// a table of shuffled blocks and L queries a sequence.
TEST(IndexTopkCuda, PicksAsPagedRows) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: the kernel runs only on CUDA";
  const at::Device cuda(at::kCUDA, 0);
  struct Shape {
    int64_t seqs, len, entries, k, ratio;
  };
  const std::vector<Shape> shapes{{1, 1, 5, 8, 4}, {3, 2, 700, 512, 4}, {2, 3, 8192, 512, 4}, {4, 1, 300, 16, 128}, {2, 5, 1000, 64, 8}};
  uint64_t seed = 500;
  for (const Shape& shape : shapes) {
    const int64_t per_block = 128 / shape.ratio, blocks = (shape.entries + per_block - 1) / per_block + 3;  // a longer table row too
    std::mt19937_64 rng(seed);
    std::vector<int64_t> pool(static_cast<size_t>(shape.seqs * blocks * 2));
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), rng);
    const at::Tensor table = at::from_blob(pool.data(), {shape.seqs, blocks}, at::kLong).clone();
    const int64_t rows = shape.seqs * shape.len;
    std::vector<int64_t> visible(static_cast<size_t>(rows));
    for (auto& v : visible) v = static_cast<int64_t>(rng() % (shape.entries + 1));
    const at::Tensor scores = make_scores(rows, shape.entries, Kind::kTied, visible, seed++);
    const at::Tensor got =
        cuda::index_topk(scores.reshape({shape.seqs, shape.len, shape.entries}).to(cuda), shape.k, table.to(cuda), shape.ratio).cpu();
    const at::Tensor ids = reference_topk(scores, shape.k);
    ASSERT_EQ(got.sizes(), (at::IntArrayRef{shape.seqs, shape.len, shape.k}));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < shape.k; ++j) {
        const int64_t e = ids[r][j].item<int64_t>(), seq = r / shape.len;
        const int64_t expected = e < 0 ? -1 : table[seq][e / per_block].item<int64_t>() * per_block + e % per_block;
        ASSERT_EQ(got[seq][r % shape.len][j].item<int64_t>(), expected)
            << shape.seqs << " x " << shape.len << " x " << shape.entries << ", k " << shape.k << ", ratio " << shape.ratio << ": row " << r
            << " pick " << j;
      }
    }
  }
}

TEST(IndexTopkCuda, BatchInvariant) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: the kernel runs only on CUDA";
  const at::Device cuda(at::kCUDA, 0);
  constexpr int64_t kEntries = 9000, kK = 512;
  const at::Tensor target = make_scores(1, kEntries, Kind::kTied, {6000}, 42);
  const at::Tensor expected = cuda::index_topk(target.to(cuda), kK).cpu();
  std::mt19937_64 rng(7);
  for (int64_t n : {2, 3, 17, 64, 129, 256}) {
    std::vector<int64_t> visible(static_cast<size_t>(n));
    for (auto& v : visible) v = static_cast<int64_t>(rng() % (kEntries + 1));
    at::Tensor batch = make_scores(n, kEntries, Kind::kTied, visible, 100 + n);
    const int64_t at = static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
    batch[at].copy_(target[0]);
    const at::Tensor got = cuda::index_topk(batch.to(cuda), kK).cpu();
    EXPECT_TRUE(at::equal(got[at], expected[0])) << "the row at " << at << " of " << n << " differs";
  }
}

}  // namespace
}  // namespace deepinfer::model::testing
