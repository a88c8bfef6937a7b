// The compressor kernel (model/cuda/compressor.h) on the GPU (label cuda; skips with a message
// without one): compress_group with the official arithmetic (the kernel) against the same
// group through the ATen path, over a schedule of prefill chunks (runs crossing window and
// block boundaries, runs shorter than a window) and batched decode steps with ragged positions,
// on the tiny dimensions and the real ones (d' 512 and 128), all compressors: CSA (overlap 2)
// and its indexer's, HCA. After every run: the tails equal bit for bit (they are copies and one
// float32 add), the paged entries of every completed window within one bfloat16 rounding.
// Batch invariance: a sequence's entries and tail are the same alone and inside a batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "model/arithmetic.h"
#include "model/compressor.h"
#include "model/model_cache.h"
#include "model/random_weights.h"
#include "tests/model/forward_test_util.h"

namespace deepinfer::model::testing {
namespace {

// The official arithmetic with the compressor on the ATen path.
class AtenCompressor final : public Arithmetic {
 public:
  bool compresses_in_place(const at::Tensor&, const at::Tensor&) const override { return false; }
};

struct GroupRun {
  std::vector<int64_t> seqs;  // indices into the sequences
  int64_t len;
};

SequenceGroup make_group(const std::vector<int64_t>& starts, const std::vector<int64_t>& slots,
                         const std::vector<std::vector<int64_t>>& tables, int64_t len, at::Device device) {
  SequenceGroup g;
  g.num_seqs = static_cast<int64_t>(starts.size());
  g.len = len;
  const auto i64 = at::TensorOptions().dtype(at::kLong);
  g.start = at::tensor(starts, i64);
  g.positions = g.start.unsqueeze(1) + at::arange(len, i64).unsqueeze(0);
  g.max_end = g.positions.max().item<int64_t>() + 1;
  g.rows = at::arange(g.num_seqs * len, i64);
  g.slots = at::tensor(slots, i64);
  std::vector<int64_t> flat;
  for (const auto& t : tables) flat.insert(flat.end(), t.begin(), t.end());
  g.block_tables = at::tensor(flat, i64).view({g.num_seqs, -1});
  for (at::Tensor* t : {&g.start, &g.positions, &g.rows, &g.slots, &g.block_tables}) *t = t->to(device);
  return g;
}

TEST(CompressorCuda, MatchesTheAtenPathAndIsBatchInvariant) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: the kernel runs only on CUDA";
  const at::Device cuda(at::kCUDA, 0);
  const char* dir = std::getenv("DEEPINFER_SOURCE_DIR");
  ModelConfig tiny = load_model_config(std::string(dir != nullptr ? dir : ".") + "/configs/models/tiny.json");
  ModelConfig real = tiny;
  real.head_dim = 512;
  real.index_head_dim = 128;
  real.rope_head_dim = 64;
  const AtenCompressor aten;
  constexpr int64_t kBlocks = 40, kPerSeq = 12;
  // Three sequences with shuffled, non-contiguous blocks; runs: prefill chunks, then decode steps.
  std::vector<std::vector<int64_t>> tables(3);
  {
    std::vector<int64_t> blocks;
    for (int64_t b = 1; b < kBlocks; ++b) blocks.push_back(b);
    std::shuffle(blocks.begin(), blocks.end(), std::mt19937_64(4));
    for (int64_t s = 0; s < 3; ++s) tables[s].assign(blocks.begin() + s * kPerSeq, blocks.begin() + (s + 1) * kPerSeq);
  }
  const std::vector<int64_t> slots{3, 1, 5};
  const std::vector<GroupRun> runs{{{0}, 37},      {{1}, 130},  {{2}, 3},       {{0}, 127}, {{2}, 255},  {{0, 1, 2}, 1},
                                   {{0, 1, 2}, 1}, {{0, 1}, 1}, {{0, 1, 2}, 1}, {{1}, 200}, {{0, 2}, 1}, {{0, 1, 2}, 1}};
  int checked = 0;
  for (const ModelConfig* config : {&tiny, &real}) {
    const ModelWeights weights = random_weights(*config, WeightFormat{io::DType::kBF16, false, true}, /*seed=*/5, cuda);
    const Rope rope = Rope::compress(*config, cuda);
    for (int64_t layer = 0; layer < config->num_layers; ++layer) {
      const int64_t m = config->compress_ratio(layer);
      if (m == 0) continue;
      const std::string prefix = "layers." + std::to_string(layer) + ".attn.";
      std::vector<std::pair<CompressorSpec, bool>> specs{
          {{prefix + "compressor.", m, config->compress_overlap(layer), config->head_dim}, false}};
      if (config->layer_type(layer) == LayerType::kCsa)
        specs.push_back({{prefix + "indexer.compressor.", m, 2, config->index_head_dim}, true});
      for (const auto& entry : specs) {
        const CompressorSpec& spec = entry.first;
        const bool indexer = entry.second;
        const auto cache = [&] {
          return ModelCache(*config, {.num_blocks = kBlocks, .num_slots = 8, .dtype = at::kBFloat16, .device = cuda});
        };
        ModelCache kernel_cache = cache(), aten_cache = cache();
        LayerCache& kc = kernel_cache.layer(layer);
        LayerCache& ac = aten_cache.layer(layer);
        std::vector<int64_t> positions(3, 0);
        std::mt19937_64 rng(layer * 10 + indexer);
        for (const GroupRun& run : runs) {
          std::vector<int64_t> starts, run_slots;
          std::vector<std::vector<int64_t>> run_tables;
          for (int64_t s : run.seqs) {
            starts.push_back(positions[s]);
            run_slots.push_back(slots[s]);
            run_tables.push_back(tables[s]);
          }
          const SequenceGroup group = make_group(starts, run_slots, run_tables, run.len, cuda);
          const int64_t B = group.num_seqs;
          const at::Tensor x = at::randn({B, run.len, config->hidden_size}, at::TensorOptions(cuda).dtype(at::kBFloat16));
          compress_group(weights, spec, group, x, rope, indexer ? kc.index_tail : kc.tail, indexer ? kc.index_keys : kc.compressed,
                         Arithmetic::official(), nullptr);
          compress_group(weights, spec, group, x, rope, indexer ? ac.index_tail : ac.tail, indexer ? ac.index_keys : ac.compressed, aten,
                         nullptr);
          const CompressorTail& kt = indexer ? kc.index_tail : kc.tail;
          const CompressorTail& at_ = indexer ? ac.index_tail : ac.tail;
          ASSERT_TRUE(at::equal(kt.kv, at_.kv) && at::equal(kt.score, at_.score)) << spec.prefix << ": the tails differ";
          // Every entry completed so far (block 0 is the ATen path's padding for incomplete windows).
          for (size_t i = 0; i < run.seqs.size(); ++i) {
            const int64_t s = run.seqs[i], done = (positions[s] + run.len) / m, per_block = 128 / m;
            const at::Tensor& kp = indexer ? kc.index_keys : kc.compressed;
            const at::Tensor& ap = indexer ? ac.index_keys : ac.compressed;
            for (int64_t w = 0; w < done; ++w) {
              const int64_t block = tables[s][(w * m) / 128], row = w % per_block;
              const at::Tensor got = kp[block][row].to(at::kFloat), want = ap[block][row].to(at::kFloat);
              const double diff = (got - want).abs().max().item<double>(), scale = want.abs().max().item<double>();
              ASSERT_LE(diff, scale / 64) << spec.prefix << ": sequence " << s << " entry " << w << " differs by " << diff << " (max "
                                          << scale << ")";
            }
            positions[s] += run.len;
          }
          ++checked;
        }
        // Batch invariance: sequence 0's next decode steps alone (on a copy of the state) and with
        // the others: its tail and its blocks' entries bit for bit.
        ModelCache solo = cache();
        LayerCache& sc = solo.layer(layer);
        for (auto [from, to] : {std::pair{&kc.tail.kv, &sc.tail.kv},
                                {&kc.tail.score, &sc.tail.score},
                                {&kc.compressed, &sc.compressed},
                                {&kc.index_tail.kv, &sc.index_tail.kv},
                                {&kc.index_tail.score, &sc.index_tail.score},
                                {&kc.index_keys, &sc.index_keys}}) {
          if (from->defined()) to->copy_(*from);
        }
        for (int step = 0; step < 2 * m && step < 9; ++step) {
          const at::Tensor x = at::randn({3, 1, config->hidden_size}, at::TensorOptions(cuda).dtype(at::kBFloat16));
          const auto decode = [&](const std::vector<int64_t>& seqs, LayerCache& c, const at::Tensor& rows) {
            std::vector<int64_t> starts, run_slots;
            std::vector<std::vector<int64_t>> run_tables;
            for (int64_t s : seqs) {
              starts.push_back(positions[s]);
              run_slots.push_back(slots[s]);
              run_tables.push_back(tables[s]);
            }
            compress_group(weights, spec, make_group(starts, run_slots, run_tables, 1, cuda), rows, rope, indexer ? c.index_tail : c.tail,
                           indexer ? c.index_keys : c.compressed, Arithmetic::official(), nullptr);
          };
          decode({2, 0, 1}, kc, at::cat({x.narrow(0, 1, 1), x.narrow(0, 0, 1), x.narrow(0, 2, 1)}));
          decode({0}, sc, x.narrow(0, 0, 1));
          for (int64_t& p : positions) ++p;
          const CompressorTail& batched = indexer ? kc.index_tail : kc.tail;
          const CompressorTail& alone = indexer ? sc.index_tail : sc.tail;
          EXPECT_TRUE(at::equal(batched.kv[slots[0]], alone.kv[slots[0]]) && at::equal(batched.score[slots[0]], alone.score[slots[0]]))
              << spec.prefix << ": sequence 0's tail differs alone and in the batch";
          const at::Tensor blocks = at::tensor(tables[0], at::kLong).to(cuda);
          EXPECT_TRUE(at::equal((indexer ? kc.index_keys : kc.compressed).index_select(0, blocks),
                                (indexer ? sc.index_keys : sc.compressed).index_select(0, blocks)))
              << spec.prefix << ": sequence 0's entries differ alone and in the batch";
        }
      }
    }
  }
  std::printf("[compressor] %d runs compared against the ATen path\n", checked);
}

}  // namespace
}  // namespace deepinfer::model::testing
