// The paged attention kernel (model/cuda/sparse_attention.h) on the GPU (label cuda; each test
// skips with a message without one):
//  - against the float64 definition over many shapes: the tiny and the real dimensions, all
//    three layer types, heads not a multiple of 16, decode groups with ragged contexts (empty
//    ring, inside the window, crossing block boundaries, more and fewer visible entries than k)
//    and prefill groups whose runs cross the window and block boundaries, rows whose keys are
//    split over several blocks and merged (33..64 heads), non-contiguous block tables; every
//    query row written, no other row touched;
//  - batch invariance: a query's output is bit-identical alone and inside batches of 2..256
//    random other sequences, at any place in the batch, and a row of two splits the same bits
//    whether its launch merges in clusters or through the merge kernel;
//  - CSA picks given as rows of the paged entries (the forward's index_topk with the block table)
//    give the same bits as the entry ids they stand for, and inputs loaded before the kernel's
//    wait for the launch before it (early_inputs) the same bits as after it;
//  - both again for the head-split kernel (SparseAttentionArgs::head_split) on the CSA and
//    window-only shapes it takes, where the GPU is Hopper;
//  - the CUDA forward of the tiny model (bfloat16) with the kernels (attention, indexer, top-k,
//    compressor) against the same forward on the ATen path, chunked and one-shot.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>

#include "model/arithmetic.h"
#include "model/model_config.h"
#include "model/random_weights.h"
#include "tests/model/forward_test_util.h"
#include "tests/model/paged_attention_fixture.h"

namespace deepinfer::model::testing {
namespace {

const AttentionShape kTinyCsa{"tiny CSA", 8, 64, 128, 4, 16};
const AttentionShape kV4Csa{"V4 CSA", 64, 512, 128, 4, 512};
const AttentionShape kV4Hca{"V4 HCA", 64, 512, 128, 128, 0};

std::vector<uint64_t> seeds_from(uint64_t first, size_t n) {
  std::vector<uint64_t> seeds(n);
  for (size_t i = 0; i < n; ++i) seeds[i] = first + 7919 * i;
  return seeds;
}

// ||out - ref|| / ||ref|| over the batch's query rows (pooled) and its largest value for one
// row (a wrong key in a row of many keys barely moves the pooled figure); checks the other rows
// stayed NaN.
struct Errors {
  double pooled = 0, worst_row = 0;
};
Errors relative_error(const AttentionShape& s, const PagedBatch& batch) {
  const HostBatch host(batch);
  const at::Tensor out = batch.out.cpu().to(at::kDouble);
  double err = 0, norm = 0, worst = 0;
  std::vector<bool> written(out.size(0), false);
  for (size_t b = 0; b < batch.starts.size(); ++b) {
    for (int64_t l = 0; l < batch.in.len; ++l) {
      const int64_t row = batch.rows[b * batch.in.len + l];
      written[row] = true;
      const at::Tensor ref = reference_row(s, batch, host, static_cast<int64_t>(b), l);
      EXPECT_TRUE(out[row].isfinite().all().item<bool>()) << s.name << ": row " << row << " not written";
      const double row_err = (out[row] - ref).pow(2).sum().item<double>(), row_norm = ref.pow(2).sum().item<double>();
      worst = std::max(worst, std::sqrt(row_err / row_norm));
      err += row_err;
      norm += row_norm;
    }
  }
  for (int64_t row = 0; row < out.size(0); ++row) {
    if (!written[row]) {
      EXPECT_TRUE(out[row].isnan().all().item<bool>()) << s.name << ": row " << row << " written";
    }
  }
  return {std::sqrt(err / norm), worst};
}

struct Group {
  std::vector<int64_t> starts;
  int64_t len;
};

// Where a block holds all heads (33..64): rows of 1 to 8 splits of 320 keys; HCA m 4 at 25,000:
// 15 splits of 448 keys, 150 such rows in two launches (their partials beyond 256 MB), and at
// 70,000 more keys than 16 splits can hold (the 16-head kernel then).
const std::vector<Group> kGroups{{{0, 1, 5, 127, 128, 129, 383, 384, 1000, 2047, 4100}, 1},
                                 {{0}, 150},
                                 {{300, 64}, 130},
                                 {{25000, 70000, 191}, 1},
                                 {{25000, 3000}, 1},
                                 {{25000}, 150}};

// Each shape over kGroups against the float64 definition; with head_split, every call must be
// one the head-split kernel takes (false, nothing run, where the first is not: not Hopper).
bool expect_matches_definition(const std::vector<AttentionShape>& shapes, bool head_split) {
  const at::Device cuda(at::kCUDA, 0);
  uint64_t seed = head_split ? 500 : 1;
  bool ran = false;
  for (const AttentionShape& s : shapes) {
    for (const Group& g : kGroups) {
      PagedBatch batch = make_batch(s, g.starts, g.len, seeds_from(seed, g.starts.size()), seed, cuda);
      ++seed;
      batch.in.head_split = head_split;
      if (head_split && !cuda::sparse_attention_runs_head_split(batch.in)) {
        if (!ran) return false;  // the first call: no GPU the kernel runs on
        ADD_FAILURE() << s.name << ": not a call the head-split kernel takes";
        continue;
      }
      ran = true;
      cuda::sparse_attention(batch.in, batch.out);
      const Errors rel = relative_error(s, batch);
      std::printf("[sparse_attention%s] %-32s %2zu sequences x %3ld queries: ||out - ref|| / ||ref|| = %.3g, worst row %.3g\n",
                  head_split ? ", head split" : "", s.name, g.starts.size(), static_cast<long>(g.len), rel.pooled, rel.worst_row);
      EXPECT_LT(rel.pooled, 1e-2) << s.name;
      EXPECT_LT(rel.worst_row, 2e-2) << s.name;
    }
  }
  return true;
}

// A query's output alone and inside batches of 2..256 random other sequences, at any place; with
// head_split, as expect_matches_definition (false where the first call is not the kernel's).
bool expect_batch_invariant(const std::vector<AttentionShape>& shapes, bool head_split) {
  const at::Device cuda(at::kCUDA, 0);
  constexpr int64_t kTargetStart = 1500;
  constexpr uint64_t kTargetSeed = 99;
  bool ran = false;
  for (const AttentionShape& s : shapes) {
    PagedBatch alone = make_batch(s, {kTargetStart}, 1, {kTargetSeed}, 1, cuda);
    alone.in.head_split = head_split;
    if (head_split && !cuda::sparse_attention_runs_head_split(alone.in)) {
      if (!ran) return false;
      ADD_FAILURE() << s.name << ": not a call the head-split kernel takes";
      continue;
    }
    ran = true;
    cuda::sparse_attention(alone.in, alone.out);
    const at::Tensor expected = alone.out[alone.rows[0]].cpu();
    std::mt19937_64 rng(5);
    for (int64_t n : {2, 3, 17, 64, 129, 256}) {
      std::vector<int64_t> starts(n);
      std::vector<uint64_t> seeds = seeds_from(1000 * n, n);
      for (auto& start : starts) start = static_cast<int64_t>(rng() % 3000);
      const size_t at = rng() % n;
      starts[at] = kTargetStart;
      seeds[at] = kTargetSeed;
      PagedBatch batch = make_batch(s, starts, 1, seeds, 100 + n, cuda, /*row_offset=*/static_cast<int64_t>(rng() % 5));
      batch.in.head_split = head_split;
      cuda::sparse_attention(batch.in, batch.out);
      EXPECT_TRUE(at::equal(batch.out[batch.rows[at]].cpu(), expected)) << s.name << ": the query at " << at << " of " << n << " differs";
    }
  }
  return true;
}

TEST(SparseAttentionCuda, MatchesTheDefinition) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: the kernel runs only on CUDA";
  expect_matches_definition({{"tiny SWA", 8, 64, 128, 0, 0},
                             kTinyCsa,
                             {"tiny HCA", 8, 64, 128, 128, 0},
                             {"V4 SWA", 64, 512, 128, 0, 0},
                             kV4Csa,
                             kV4Hca,
                             {"V4 CSA, k 32 < visible", 64, 512, 128, 4, 32},
                             {"20 heads, D 128, W 64, HCA m 8", 20, 128, 64, 8, 0},
                             {"24 heads, D 256, CSA m 16 k 8", 24, 256, 128, 16, 8},
                             {"48 heads, D 512, CSA k 700", 48, 512, 128, 4, 700},
                             {"40 heads, D 128, HCA m 32", 40, 128, 128, 32, 0},
                             {"40 heads, D 64, HCA m 4", 40, 64, 128, 4, 0}},
                            /*head_split=*/false);
}

TEST(SparseAttentionCuda, BatchInvariant) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: the kernel runs only on CUDA";
  expect_batch_invariant({kV4Csa, kV4Hca, kTinyCsa}, /*head_split=*/false);
}

// A row of two splits merges in its thread-block cluster where no row of its launch has more, and
// through the merge kernel's partials where one has (HCA at 100,000: 3 splits); its output is the
// same bits either way.
TEST(SparseAttentionCuda, TwoSplitRowsMergeAlikeInEveryLaunch) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: the kernel runs only on CUDA";
  const at::Device cuda(at::kCUDA, 0);
  constexpr int64_t kTargetStart = 30000;  // 128 + 234 keys: 2 splits
  constexpr uint64_t kTargetSeed = 77;
  PagedBatch alone = make_batch(kV4Hca, {kTargetStart}, 1, {kTargetSeed}, 1, cuda);
  cuda::sparse_attention(alone.in, alone.out);
  const at::Tensor expected = alone.out[alone.rows[0]].cpu();
  ASSERT_TRUE(expected.isfinite().all().item<bool>());
  for (const std::vector<int64_t>& starts : {std::vector<int64_t>{kTargetStart, 100000}, std::vector<int64_t>{0, 100000, kTargetStart}}) {
    std::vector<uint64_t> seeds = seeds_from(300 + starts.size(), starts.size());
    const size_t at = std::find(starts.begin(), starts.end(), kTargetStart) - starts.begin();
    seeds[at] = kTargetSeed;
    PagedBatch batch = make_batch(kV4Hca, starts, 1, seeds, 2, cuda);
    cuda::sparse_attention(batch.in, batch.out);
    EXPECT_TRUE(at::equal(batch.out[batch.rows[at]].cpu(), expected)) << "the row at " << at << " of " << starts.size() << " differs";
  }
}

// CSA picks given as rows of the paged entries (PagedAttention::picks_are_rows, as the forward's
// index_topk makes them) read the same keys as the entry ids they stand for: the same bits, on
// every group of kGroups, for the split kernels and (on Hopper) the head-split kernel.
TEST(SparseAttentionCuda, PicksAsRowsReadTheSameKeys) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: the kernel runs only on CUDA";
  const at::Device cuda(at::kCUDA, 0);
  uint64_t seed = 800;
  int compared = 0;
  for (const AttentionShape& s : {kTinyCsa, kV4Csa, AttentionShape{"24 heads, D 256, CSA m 16 k 8", 24, 256, 128, 16, 8},
                                  AttentionShape{"48 heads, D 512, CSA k 700", 48, 512, 128, 4, 700}}) {
    for (const Group& g : kGroups) {
      PagedBatch batch = make_batch(s, g.starts, g.len, seeds_from(seed, g.starts.size()), seed, cuda);
      ++seed;
      if (!batch.in.picks.defined()) continue;  // nothing visible to pick
      for (const bool head_split : {false, true}) {
        batch.in.head_split = head_split;
        batch.in.picks_are_rows = false;
        if (head_split && !cuda::sparse_attention_runs_head_split(batch.in)) continue;
        batch.out.fill_(NAN);
        cuda::sparse_attention(batch.in, batch.out);
        const at::Tensor written = at::tensor(batch.rows, at::kLong).to(cuda);  // the others stay NaN
        const at::Tensor by_ids = batch.out.index_select(0, written);
        const at::Tensor ids = batch.in.picks;
        const int64_t per_block = 128 / s.ratio;
        const at::Tensor seq = at::div(at::arange(ids.size(0), ids.options()), batch.in.len, "floor").unsqueeze(1).expand_as(ids);
        const at::Tensor w = ids.clamp_min(0);
        const at::Tensor rows =
            batch.in.block_tables.index({seq, at::div(w, per_block, "floor")}) * per_block + at::remainder(w, per_block);
        batch.in.picks = at::where(ids < 0, ids, rows).contiguous();
        batch.in.picks_are_rows = true;
        batch.out.fill_(NAN);
        cuda::sparse_attention(batch.in, batch.out);
        batch.in.picks = ids;
        EXPECT_TRUE(at::equal(batch.out.index_select(0, written), by_ids))
            << s.name << ", " << g.starts.size() << " sequences x " << g.len << " queries" << (head_split ? ", head split" : "");
        ++compared;
      }
    }
  }
  std::printf("[sparse_attention] %d launches with picks as rows compared with picks as entry ids\n", compared);
  EXPECT_GT(compared, 0);
}

// q loaded before the kernel waits for the launch before it (PagedAttention::early_inputs, the
// Hopper split kernel) gives the same bits as the launch that loads it after its wait, on every
// group of kGroups and the V4 CSA, HCA and SWA shapes. Before each early launch runs a plain one of
// the same batch into another tensor (it reads q, writes no input), so the early launch's blocks
// start while that kernel still runs (it lets the next launch start after its tiles) and load q
// during it, as the promise allows.
TEST(SparseAttentionCuda, EarlyInputsGiveTheSameBits) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: the kernel runs only on CUDA";
  const at::Device cuda(at::kCUDA, 0);
  uint64_t seed = 900;
  int compared = 0;
  for (const AttentionShape& s :
       {kV4Csa, kV4Hca, AttentionShape{"V4 SWA", 64, 512, 128, 0, 0}, AttentionShape{"48 heads, D 512, CSA k 700", 48, 512, 128, 4, 700}}) {
    for (const Group& g : kGroups) {
      PagedBatch batch = make_batch(s, g.starts, g.len, seeds_from(seed, g.starts.size()), seed, cuda);
      ++seed;
      if (!cuda::sparse_attention_runs_split_sm90(batch.in)) GTEST_SKIP() << "early_inputs applies to the Hopper split kernel only";
      const at::Tensor written = at::tensor(batch.rows, at::kLong).to(cuda);
      batch.in.early_inputs = false;
      batch.out.fill_(NAN);
      cuda::sparse_attention(batch.in, batch.out);
      const at::Tensor plain = batch.out.index_select(0, written);
      at::Tensor before = at::empty_like(batch.out);
      batch.out.fill_(NAN);
      cuda::sparse_attention(batch.in, before);  // the launch just before, still running as the next starts
      batch.in.early_inputs = true;
      cuda::sparse_attention(batch.in, batch.out);
      EXPECT_TRUE(plain.isfinite().all().item<bool>()) << s.name << ": a row not written";
      EXPECT_TRUE(at::equal(batch.out.index_select(0, written), plain))
          << s.name << ", " << g.starts.size() << " sequences x " << g.len << " queries";
      ++compared;
    }
  }
  std::printf("[sparse_attention] %d launches with early inputs compared with the plain launch\n", compared);
  EXPECT_GT(compared, 0);
}

// The head-split kernel (sparse_attention_heads.h, a kernel under test that the forward does not
// use yet) on the calls it takes: CSA and the window alone, D 512, 33..64 heads, at most 640 keys.
const std::vector<AttentionShape> kHeadSplitShapes{{"V4 SWA", 64, 512, 128, 0, 0},
                                                   kV4Csa,
                                                   {"V4 CSA, k 32 < visible", 64, 512, 128, 4, 32},
                                                   {"48 heads, D 512, CSA k 300", 48, 512, 128, 4, 300},
                                                   {"33 heads, D 512, W 64, SWA", 33, 512, 64, 0, 0}};

TEST(SparseAttentionCuda, HeadSplitMatchesTheDefinition) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: the kernel runs only on CUDA";
  if (!expect_matches_definition(kHeadSplitShapes, /*head_split=*/true))
    GTEST_SKIP() << "the head-split kernel runs on Hopper (compute capability 9.0) only";
}

TEST(SparseAttentionCuda, HeadSplitBatchInvariant) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: the kernel runs only on CUDA";
  if (!expect_batch_invariant({kV4Csa, {"V4 SWA", 64, 512, 128, 0, 0}}, /*head_split=*/true))
    GTEST_SKIP() << "the head-split kernel runs on Hopper (compute capability 9.0) only";
}

// Index scores of the group's queries first .. first + lt - 1 by the kernel, and by the official
// ATen indexer over keys gathered through the block tables, masked to the visible entries.
struct IndexScores {
  at::Tensor kernel, aten;  // [B, lt, E] float32
};
IndexScores index_scores_both(const AttentionShape& s, const PagedBatch& batch, int64_t first, int64_t lt) {
  const int64_t B = static_cast<int64_t>(batch.starts.size()), L = batch.in.len, H = s.heads, D = s.dim;
  int64_t max_end = 0;
  for (int64_t start : batch.starts) max_end = std::max(max_end, start + L);
  const int64_t E = max_end / s.ratio, per_block = 128 / s.ratio;
  const at::Tensor q = batch.in.q.index_select(0, batch.in.query_rows).view({B, L, H, D}).narrow(1, first, lt).contiguous();
  const at::Tensor w = (q.select(-1, 0).to(at::kFloat) * 2).contiguous();  // [B, lt, H]: a function of the query row alone
  IndexScores out;
  out.kernel = cuda::index_scores({.q = q,
                                   .weights = w,
                                   .keys = batch.in.entries,
                                   .start = batch.in.start,
                                   .block_tables = batch.in.block_tables,
                                   .first = first,
                                   .entries = E,
                                   .ratio = s.ratio});
  const at::Tensor e = at::arange(E, batch.in.start.options());
  const at::Tensor blocks = batch.in.block_tables.index_select(1, at::div(e * s.ratio, 128, "floor"));  // [B, E]
  const at::Tensor keys = batch.in.entries.view({-1, D}).index_select(0, (blocks * per_block + at::remainder(e, per_block)).reshape(-1));
  const at::Tensor pos = batch.in.start.view({B, 1}) + first + at::arange(lt, batch.in.start.options());
  const at::Tensor visible = e < at::div(pos + 1, s.ratio, "floor").unsqueeze(-1);  // [B, lt, E]
  out.aten = Arithmetic::official().index_scores(q, w, keys.view({B, E, D})).masked_fill(~visible, -INFINITY);
  return out;
}

TEST(IndexScoresCuda, MatchesTheAtenIndexerAndIsBatchInvariant) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: the kernel runs only on CUDA";
  const at::Device cuda(at::kCUDA, 0);
  const std::vector<AttentionShape> shapes{{"tiny indexer", 16, 32, 128, 4, 0},
                                           {"V4 indexer", 64, 128, 128, 4, 0},
                                           {"48 heads, D 64, m 8", 48, 64, 128, 8, 0},
                                           {"20 heads, D 128", 20, 128, 128, 4, 0}};
  struct Call {
    std::vector<int64_t> starts;
    int64_t len, first, lt;
  };
  const std::vector<Call> calls{
      {{0, 3, 4, 127, 128, 1000, 2047, 4100, 9000}, 1, 0, 1}, {{300, 64}, 150, 0, 100}, {{300, 64}, 150, 100, 50}};
  uint64_t seed = 50;
  for (const AttentionShape& s : shapes) {
    for (const Call& c : calls) {
      const PagedBatch batch = make_batch(s, c.starts, c.len, seeds_from(seed, c.starts.size()), seed, cuda);
      ++seed;
      const IndexScores scores = index_scores_both(s, batch, c.first, c.lt);
      const at::Tensor visible = at::isfinite(scores.aten);
      ASSERT_TRUE(at::equal(visible, at::isfinite(scores.kernel))) << s.name << ": the kernel masks other entries";
      const at::Tensor diff = at::where(visible, scores.kernel - scores.aten, at::zeros({}, scores.aten.options()));
      const at::Tensor ref = at::where(visible, scores.aten, at::zeros({}, scores.aten.options()));
      const double rel = (diff.norm() / ref.norm()).item<double>(), worst = diff.abs().max().item<double>();
      std::printf(
          "[index_scores] %-20s %zu sequences x %3ld queries (from %ld), %ld entries: ||diff|| / ||ref|| = %.3g, max |diff| %.3g "
          "(max |ref| %.3g)\n",
          s.name, c.starts.size(), static_cast<long>(c.lt), static_cast<long>(c.first), static_cast<long>(scores.aten.size(2)), rel, worst,
          ref.abs().max().item<double>());
      EXPECT_LT(rel, 1e-3) << s.name;
    }
    // A query's scores alone and inside batches, bit for bit (its own entries only: the batch's E grows).
    const PagedBatch alone = make_batch(s, {2500}, 1, {77}, 1, cuda);
    const at::Tensor expected = index_scores_both(s, alone, 0, 1).kernel.cpu();
    std::mt19937_64 rng(3);
    for (int64_t n : {2, 64, 256}) {
      std::vector<int64_t> starts(n);
      std::vector<uint64_t> seeds = seeds_from(500 * n, n);
      for (auto& start : starts) start = static_cast<int64_t>(rng() % 4000);
      const size_t at = rng() % n;
      starts[at] = 2500;
      seeds[at] = 77;
      const PagedBatch batch = make_batch(s, starts, 1, seeds, 300 + n, cuda);
      const at::Tensor got = index_scores_both(s, batch, 0, 1).kernel[static_cast<int64_t>(at)].narrow(-1, 0, expected.size(-1)).cpu();
      EXPECT_TRUE(at::equal(got, expected[0])) << s.name << ": the query at " << at << " of " << n << " differs";
    }
  }
}

// The official arithmetic on the ATen path: attention over gathered keys, at::topk, the
// compressor's ATen ops.
class GatheredAttention final : public Arithmetic {
 public:
  bool attends_in_place(const at::Tensor&, const at::Tensor&) const override { return false; }
  bool compresses_in_place(const at::Tensor&, const at::Tensor&) const override { return false; }
  bool mixes_in_place(const at::Tensor&) const override { return false; }
};

TEST(SparseAttentionCuda, ForwardMatchesGatheredAttention) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: the kernel runs only on CUDA";
  const at::Device cuda(at::kCUDA, 0);
  const char* dir = std::getenv("DEEPINFER_SOURCE_DIR");
  const ModelConfig config = load_model_config(std::string(dir != nullptr ? dir : ".") + "/configs/models/tiny.json");
  const ModelWeights weights = random_weights(config, WeightFormat{io::DType::kBF16, false, true}, /*seed=*/3, cuda);
  SingleRankCommunicator comm;
  const GatheredAttention gathered;
  const DeepseekV4Model kernel_model(weights, comm, model_options()), aten_model(weights, comm, model_options(gathered));
  ASSERT_TRUE(Arithmetic::official().attends_in_place(
      at::empty({1, config.num_heads, config.head_dim}, at::TensorOptions(cuda).dtype(at::kBFloat16)),
      at::empty({2, config.sliding_window, config.head_dim}, at::TensorOptions(cuda).dtype(at::kBFloat16))));
  constexpr int64_t kBlocks = 16;
  const auto blocks = shuffled_blocks({4, 4, 2}, kBlocks, /*seed=*/9);
  // Prefill chunks crossing the window and block boundaries, then decode steps; the three share batches.
  const std::vector<SeqPlan> plans{{random_tokens(420, config.vocab_size, 1), {37, 100, 250}, 2, blocks[0]},
                                   {random_tokens(400, config.vocab_size, 2), {128, 1, 127, 100}, 5, blocks[1]},
                                   {random_tokens(140, config.vocab_size, 3), {}, 7, blocks[2]}};
  const auto cache = [&] { return ModelCache(config, {.num_blocks = kBlocks, .num_slots = 8, .dtype = at::kBFloat16, .device = cuda}); };
  ModelCache c1 = cache(), c2 = cache(), c3 = cache();
  const auto with_kernel = run_incremental(kernel_model, plans, c1, nullptr, cuda);
  const auto with_aten = run_incremental(aten_model, plans, c2, nullptr, cuda);
  const auto one_shot = run_one_shot(kernel_model, plans, c3, cuda);
  // bfloat16 with random tiny weights: where a rounding difference flips an expert or indexer
  // pick, a position's logits move a lot, so the criterion is on the spread over positions
  // (each position's max |diff| over the vocabulary), set against what chunking alone moves in
  // the gathered path; a kernel reading a wrong row moves nearly every position.
  ModelCache c4 = cache();
  const auto aten_one_shot = run_one_shot(aten_model, plans, c4, cuda);
  double scale = 0;
  for (const auto& logits : with_aten) scale = std::max(scale, logits.abs().max().item<double>());
  const auto spread = [](const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
    std::vector<at::Tensor> per_position;
    for (size_t i = 0; i < a.size(); ++i) per_position.push_back(std::get<0>((a[i] - b[i]).abs().max(1)));
    const at::Tensor sorted = std::get<0>(at::cat(per_position).to(at::kDouble).sort());
    const auto at_fraction = [&](double f) { return sorted[static_cast<int64_t>(f * (sorted.numel() - 1))].item<double>(); };
    return std::array<double, 3>{at_fraction(0.5), at_fraction(0.9), at_fraction(1.0)};
  };
  const auto vs_aten = spread(with_kernel, with_aten), vs_one_shot = spread(with_kernel, one_shot);
  const auto aten_chunking = spread(with_aten, aten_one_shot);
  std::printf(
      "[sparse_attention] tiny forward, bfloat16, per-position max |diff| (median / p90 / max; max |logit| %.3g): kernel vs gathered "
      "%.3g / %.3g / %.3g; kernel chunked vs one-shot %.3g / %.3g / %.3g; gathered chunked vs one-shot %.3g / %.3g / %.3g\n",
      scale, vs_aten[0], vs_aten[1], vs_aten[2], vs_one_shot[0], vs_one_shot[1], vs_one_shot[2], aten_chunking[0], aten_chunking[1],
      aten_chunking[2]);
  // Within a few times what chunking moves in the gathered path (floors for when that is ~0).
  EXPECT_LT(vs_aten[0], std::max(3 * aten_chunking[0], 0.01 * scale));
  EXPECT_LT(vs_aten[1], std::max(3 * aten_chunking[1], 0.03 * scale));
  EXPECT_LT(vs_one_shot[0], std::max(3 * aten_chunking[0], 0.01 * scale));
  EXPECT_LT(vs_one_shot[1], std::max(3 * aten_chunking[1], 0.03 * scale));
  for (const auto& logits : with_kernel) EXPECT_TRUE(logits.isfinite().all().item<bool>());
}

}  // namespace
}  // namespace deepinfer::model::testing
