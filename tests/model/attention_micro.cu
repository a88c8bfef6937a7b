// Torch-free microbenchmark of the decode attention and indexer-score kernels
// (model/cuda/sparse_attention.h, index_scores.h): builds with nvcc alone in seconds, for
// iterating on a kernel on the GPU machine (tests/gpu/kernel_micro.sh). Decode queries, one per
// sequence, every sequence at the same context; random bf16 inputs drawn on the device; block
// tables random permutations over a pool several times the L2 cache, and a different one for
// each of the rotated input sets, so timed launches read HBM. the iterations
// captured in a CUDA graph and replayed between CUDA events (device time per launch, the host's
// launch time not counted), one warm-up pass over every set, the median of 5 replays. Bytes counted as attention_bench counts them.
// With -DDEEPINFER_MICRO_REFERENCE and a second copy of the kernels compiled with
// -Ddeepinfer=deepinfer_ref (tests/gpu/kernel_micro.sh takes it from a git revision), each kernel's output is
// also compared with that copy's: max |new - old| / max |old| and the count of unequal values.
//   attention_micro attention|indexer [--batch 64] [--context 32768] [--layer csa|hca|swa] [--iters 50]
//                   [--hot 1] [--head-split 1] [--pick-rows 1] [--early 1]
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "model/cuda/index_scores.h"
#include "model/cuda/index_topk.h"
#include "model/cuda/sparse_attention.h"

#ifdef DEEPINFER_SM90_TRACE
namespace deepinfer::model::cuda {
void sm90_trace_report();   // model/cuda/sparse_attention_sm90.cu built with -DDEEPINFER_SM90_TRACE=1
void heads_trace_report();  // model/cuda/sparse_attention_heads.cu, the same
}  // namespace deepinfer::model::cuda
#endif

#ifdef DEEPINFER_MICRO_REFERENCE
// The reference copy is compiled with -Ddeepinfer=deepinfer_ref against the same headers, so its
// argument structs have the same layout under another name.
namespace deepinfer_ref::model::cuda {
struct SparseAttentionArgs;
struct IndexScoresArgs;
size_t sparse_attention_workspace_bytes(const SparseAttentionArgs& args);
cudaError_t sparse_attention(const SparseAttentionArgs& args, cudaStream_t stream);
cudaError_t index_scores(const IndexScoresArgs& args, cudaStream_t stream);
}  // namespace deepinfer_ref::model::cuda
namespace reference {
size_t sparse_attention_workspace_bytes(const deepinfer::model::cuda::SparseAttentionArgs& a) {
  return deepinfer_ref::model::cuda::sparse_attention_workspace_bytes(
      reinterpret_cast<const deepinfer_ref::model::cuda::SparseAttentionArgs&>(a));
}
cudaError_t sparse_attention(const deepinfer::model::cuda::SparseAttentionArgs& a, cudaStream_t stream) {
  return deepinfer_ref::model::cuda::sparse_attention(reinterpret_cast<const deepinfer_ref::model::cuda::SparseAttentionArgs&>(a), stream);
}
cudaError_t index_scores(const deepinfer::model::cuda::IndexScoresArgs& a, cudaStream_t stream) {
  return deepinfer_ref::model::cuda::index_scores(reinterpret_cast<const deepinfer_ref::model::cuda::IndexScoresArgs&>(a), stream);
}
}  // namespace reference
#endif

namespace {

using deepinfer::model::cuda::IndexScoresArgs;
using deepinfer::model::cuda::IndexTopkArgs;
using deepinfer::model::cuda::SparseAttentionArgs;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "attention_micro: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

std::string option(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 2; i + 1 < argc; ++i)
    if (std::string(argv[i]) == std::string("--") + name) return argv[i + 1];
  return fallback;
}

__global__ void fill_bf16(__nv_bfloat16* p, size_t n, uint64_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    const float u = static_cast<float>(x >> 40) / static_cast<float>(1 << 24);  // [0, 1)
    p[i] = __float2bfloat16_rn((2.0f * u - 1.0f) * scale);
  }
}

template <typename T>
T* device_copy(const std::vector<T>& host) {
  T* p = nullptr;
  check(cudaMalloc(&p, host.size() * sizeof(T) + 16), "cudaMalloc");
  check(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  return p;
}

__nv_bfloat16* random_bf16(size_t n, uint64_t seed, float scale) {
  __nv_bfloat16* p = nullptr;
  check(cudaMalloc(&p, n * 2 + 16), "cudaMalloc");
  fill_bf16<<<1024, 256>>>(p, n, seed, scale);
  check(cudaGetLastError(), "fill");
  return p;
}

struct Timer {
  cudaEvent_t a, b;
  Timer() {
    check(cudaEventCreate(&a), "event");
    check(cudaEventCreate(&b), "event");
  }
};

cudaStream_t timed_stream() {
  static cudaStream_t stream = [] {
    cudaStream_t s = nullptr;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
    return s;
  }();
  return stream;
}

// Device time per launch: `iters` launches (launch(i, stream)) captured in one CUDA graph and
// replayed between two events, so neither the host's launch time nor its gaps count; the median
// of 5 replays.
template <typename Launch>
double time_median(int64_t iters, Launch&& launch) {
  cudaStream_t stream = timed_stream();
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "capture");
  for (int64_t i = 0; i < iters; ++i) launch(i, stream);
  check(cudaStreamEndCapture(stream, &graph), "capture");
  check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  check(cudaGraphLaunch(exec, stream), "replay");  // warm-up
  Timer t;
  std::vector<double> ms;
  for (int round = 0; round < 5; ++round) {
    check(cudaEventRecord(t.a, stream), "record");
    check(cudaGraphLaunch(exec, stream), "replay");
    check(cudaEventRecord(t.b, stream), "record");
    check(cudaEventSynchronize(t.b), "sync");
    float e = 0;
    check(cudaEventElapsedTime(&e, t.a, t.b), "elapsed");
    ms.push_back(e / static_cast<double>(iters));
  }
  check(cudaGraphExecDestroy(exec), "destroy");
  check(cudaGraphDestroy(graph), "destroy");
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// max |x - y| / max |y| and the number of unequal elements (bf16 or float32).
template <typename T>
void compare(const T* x_dev, const T* y_dev, size_t n, const char* what) {
  std::vector<T> x(n), y(n);
  check(cudaMemcpy(x.data(), x_dev, n * sizeof(T), cudaMemcpyDeviceToHost), "copy back");
  check(cudaMemcpy(y.data(), y_dev, n * sizeof(T), cudaMemcpyDeviceToHost), "copy back");
  double diff = 0, ref = 0;
  size_t unequal = 0, nan = 0;
  for (size_t i = 0; i < n; ++i) {
    const double a = static_cast<double>(static_cast<float>(x[i])), b = static_cast<double>(static_cast<float>(y[i]));
    if (std::isnan(a) != std::isnan(b)) ++nan;
    if (std::isinf(b) && a == b) continue;
    if (std::memcmp(&x[i], &y[i], sizeof(T)) != 0) ++unequal;
    if (std::isfinite(a) && std::isfinite(b)) {
      diff = std::max(diff, std::fabs(a - b));
      ref = std::max(ref, std::fabs(b));
    }
  }
  std::printf("  vs reference %s: max|diff|/max|ref| %.3e, %zu of %zu values differ, %zu NaN mismatches\n", what, diff / ref, unequal, n,
              nan);
}

int run_attention(int argc, char** argv) {
  const int64_t B = std::stol(option(argc, argv, "batch", "64")), context = std::stol(option(argc, argv, "context", "32768"));
  const int64_t iters = std::stol(option(argc, argv, "iters", "50"));
  const std::string layer = option(argc, argv, "layer", "csa");
  const bool hot = option(argc, argv, "hot", "0") == "1";  // every key from 64 blocks (the L2): the kernel without HBM latency
  const bool head_split = option(argc, argv, "head-split", "0") == "1";  // SparseAttentionArgs::head_split
  const bool pick_rows = option(argc, argv, "pick-rows", "0") == "1";    // SparseAttentionArgs::picks_are_rows
  // SparseAttentionArgs::early_inputs: true of these launches, every q and index written before the
  // timed loop, and the launch before each one of these kernels, which waits before it lets the next start.
  const bool early = option(argc, argv, "early", "0") == "1";
  const int H = 64, D = 512, W = 128;
  const int ratio = layer == "csa" ? 4 : layer == "hca" ? 128 : 0;
  const int64_t topk = layer == "csa" ? 512 : 0;
  const int64_t blocks_per_seq = (context + 127) / 128, per_block = ratio > 0 ? 128 / ratio : 1;
  // The entry pool: the sequences' blocks, at least 4x the 60 MB L2.
  int64_t pool_blocks = B * blocks_per_seq + 1;
  while (ratio > 0 && pool_blocks * per_block * D * 2 < (int64_t{256} << 20)) pool_blocks *= 2;
  const __nv_bfloat16* entries = ratio > 0 ? random_bf16(size_t(pool_blocks) * per_block * D, 11, 2.0f) : nullptr;
  const int sets = 8;
  const int64_t entries_seen = ratio > 0 ? context / ratio : 0;
  const int64_t keys = std::min<int64_t>(W, context) + (topk > 0 ? std::min(topk, entries_seen) : entries_seen);
  std::vector<SparseAttentionArgs> args(sets);
  std::vector<const int64_t*> entry_picks(sets);  // the picks as entry ids, for the reference revision
  std::mt19937_64 rng(5);
  std::vector<int64_t> start(B, context - 1), rows(B);
  std::iota(rows.begin(), rows.end(), 0);
  size_t workspace = 0;
  for (int s = 0; s < sets; ++s) {
    SparseAttentionArgs& a = args[s];
    a.q = random_bf16(size_t(B) * H * D, 100 + s, 2.0f);
    a.kv = random_bf16(size_t(B) * D, 200 + s, 2.0f);
    a.ring = random_bf16(size_t(B + 1) * W * D, 300 + s, 2.0f);
    a.entries = entries;
    a.query_rows = device_copy(rows);
    a.start = device_copy(start);
    std::vector<int64_t> slots(B), table(size_t(B) * blocks_per_seq), perm(pool_blocks - 1);
    std::iota(slots.begin(), slots.end(), 1);
    std::shuffle(slots.begin(), slots.end(), rng);
    std::iota(perm.begin(), perm.end(), 1);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::copy(perm.begin(), perm.begin() + table.size(), table.begin());
    if (hot)
      for (auto& t : table) t = 1 + t % 64;
    a.slots = device_copy(slots);
    a.block_tables = device_copy(table);
    if (topk > 0) {
      std::vector<int64_t> picks(size_t(B) * topk), all(entries_seen);
      for (int64_t b = 0; b < B; ++b) {
        std::iota(all.begin(), all.end(), 0);
        std::shuffle(all.begin(), all.end(), rng);
        std::sort(all.begin(), all.begin() + topk);
        std::copy(all.begin(), all.begin() + topk, picks.begin() + b * topk);
      }
      a.picks = entry_picks[s] = device_copy(picks);
      a.num_picks = topk;
      if (pick_rows) {  // the block table applied, as index_topk does for the forward
        for (int64_t b = 0; b < B; ++b)
          for (int64_t c = 0; c < topk; ++c) {
            int64_t& w = picks[b * topk + c];
            w = table[b * blocks_per_seq + w * ratio / 128] * per_block + w % per_block;
          }
        a.picks = device_copy(picks);
        a.picks_are_rows = true;
      }
    }
    std::vector<float> sink(H);
    for (auto& v : sink) v = std::uniform_real_distribution<float>(-1, 1)(rng);
    a.sink = device_copy(sink);
    check(cudaMalloc(&a.out, size_t(B) * H * D * 2), "cudaMalloc");
    a.max_entries = entries_seen;
    a.num_seqs = B;
    a.len = 1;
    a.q_rows = B;
    a.block_stride = blocks_per_seq;
    a.heads = H;
    a.head_dim = D;
    a.window = W;
    a.ratio = ratio;
    a.scale = 1.0f / std::sqrt(static_cast<float>(D));
    a.head_split = head_split;
    a.early_inputs = early;
    workspace = std::max(workspace, deepinfer::model::cuda::sparse_attention_workspace_bytes(a));
  }
  float* ws = nullptr;
  if (workspace > 0) check(cudaMalloc(&ws, workspace), "cudaMalloc");
  for (auto& a : args) a.workspace = ws;
  for (auto& a : args) check(deepinfer::model::cuda::sparse_attention(a, nullptr), "sparse_attention");  // warm-up
  check(cudaDeviceSynchronize(), "warm-up");
  const double m = time_median(
      iters, [&](int64_t i, cudaStream_t st) { check(deepinfer::model::cuda::sparse_attention(args[i % sets], st), "sparse_attention"); });
  const double bytes = double(B) * (keys * D * 2.0 + 2.0 * H * D * 2 + topk * 8);
  const double flops = 4.0 * B * keys * H * D;
  std::printf(
      "attention_micro: %s%s%s batch %ld context %ld (%ld keys per query), H %d D %d: median %.1f us -> %.0f GB/s = %.1f%% of 4.3 TB/s, "
      "%.1f "
      "TFLOP/s\n",
      layer.c_str(), hot ? " (hot keys)" : "",
      head_split  ? " (head split)"
      : pick_rows ? (early ? " (pick rows, early inputs)" : " (pick rows)")
      : early     ? " (early inputs)"
                  : "",
      long(B), long(context), long(keys), H, D, m * 1e3, bytes / m / 1e6, bytes / m / 1e6 / 43.0, flops / m / 1e9);
#ifdef DEEPINFER_SM90_TRACE
  if (head_split)
    deepinfer::model::cuda::heads_trace_report();  // the last timed launch
  else
    deepinfer::model::cuda::sm90_trace_report();
#endif
#ifdef DEEPINFER_MICRO_REFERENCE
  {
    SparseAttentionArgs r = args[0];
    r.head_split = false;  // the reference revision's default kernels (a revision without the field reads none)
    r.picks = entry_picks[0];
    r.picks_are_rows = false;  // entry ids (a revision with the field would read them as rows)
    r.early_inputs = false;    // the reference's plain launch (a revision with the field would load q early)
    const size_t n = size_t(B) * H * D;
    std::vector<__nv_bfloat16*> ref_outs(sets);  // one a set, as this version's: a single buffer would stay in the L2 and flatter it
    for (auto& o : ref_outs) check(cudaMalloc(&o, n * 2), "cudaMalloc");
    __nv_bfloat16* ref_out = ref_outs[0];
    r.out = ref_out;
    float* ref_ws = nullptr;
    const size_t ref_bytes = reference::sparse_attention_workspace_bytes(r);
    if (ref_bytes > 0) check(cudaMalloc(&ref_ws, ref_bytes), "cudaMalloc");
    r.workspace = ref_ws;
    check(reference::sparse_attention(r, nullptr), "reference sparse_attention");
    check(deepinfer::model::cuda::sparse_attention(args[0], nullptr), "sparse_attention");
    check(cudaDeviceSynchronize(), "sync");
    compare(args[0].out, ref_out, n, "attention out");
    std::vector<SparseAttentionArgs> ref_args = args;
    for (int set = 0; set < sets; ++set) {
      SparseAttentionArgs& x = ref_args[set];
      x.out = ref_outs[set];
      x.workspace = ref_ws;
      x.head_split = false;
      x.picks = entry_picks[set];
      x.picks_are_rows = false;
      x.early_inputs = false;
    }
    const double ref_ms =
        time_median(iters, [&](int64_t i, cudaStream_t st) { check(reference::sparse_attention(ref_args[i % sets], st), "reference"); });
    std::printf("  reference median %.1f us (this version %.1f us)\n", ref_ms * 1e3, m * 1e3);
  }
#endif
  return 0;
}

int run_indexer(int argc, char** argv) {
  const int64_t B = std::stol(option(argc, argv, "batch", "64")), context = std::stol(option(argc, argv, "context", "131072"));
  const int64_t iters = std::stol(option(argc, argv, "iters", "50"));
  const int H = 64, D = 128, ratio = 4;
  const int64_t E = context / ratio, blocks_per_seq = (context + 127) / 128, per_block = 128 / ratio;
  int64_t pool_blocks = B * blocks_per_seq + 1;
  while (pool_blocks * per_block * D * 2 < (int64_t{256} << 20)) pool_blocks *= 2;
  const __nv_bfloat16* keys = random_bf16(size_t(pool_blocks) * per_block * D, 17, 1.0f);
  const int sets = 4;
  std::vector<IndexScoresArgs> args(sets);
  std::mt19937_64 rng(7);
  std::vector<int64_t> start(B, context - 1), table0;  // table0: set 0's block table
  for (int s = 0; s < sets; ++s) {
    IndexScoresArgs& a = args[s];
    a.q = random_bf16(size_t(B) * H * D, 400 + s, 1.0f);
    std::vector<float> w(size_t(B) * H);
    for (auto& v : w) v = std::uniform_real_distribution<float>(-1, 1)(rng);
    a.weights = device_copy(w);
    a.keys = keys;
    a.start = device_copy(start);
    std::vector<int64_t> table(size_t(B) * blocks_per_seq), perm(pool_blocks - 1);
    std::iota(perm.begin(), perm.end(), 1);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::copy(perm.begin(), perm.begin() + table.size(), table.begin());
    a.block_tables = device_copy(table);
    if (s == 0) table0 = table;
    check(cudaMalloc(&a.scores, size_t(B) * E * 4), "cudaMalloc");
    a.num_seqs = B;
    a.len = 1;
    a.first = 0;
    a.entries = E;
    a.block_stride = blocks_per_seq;
    a.heads = H;
    a.dim = D;
    a.ratio = ratio;
  }
  for (auto& a : args) check(deepinfer::model::cuda::index_scores(a, nullptr), "index_scores");
  check(cudaDeviceSynchronize(), "warm-up");
  const double m = time_median(
      iters, [&](int64_t i, cudaStream_t st) { check(deepinfer::model::cuda::index_scores(args[i % sets], st), "index_scores"); });
  const double bytes = double(B) * (E * (D * 2.0 + 4) + H * (D * 2.0 + 4));
  std::printf(
      "attention_micro: indexer batch %ld context %ld (%ld entries), H %d D %d: median %.1f us -> %.0f GB/s = %.1f%% of 4.3 TB/s, %.1f "
      "TFLOP/s\n",
      long(B), long(context), long(E), H, D, m * 1e3, bytes / m / 1e6, bytes / m / 1e6 / 43.0, 2.0 * B * E * H * D / m / 1e9);
  {  // the top 512 of set 0's scores as entry ids and as rows of the paged entries (the block table applied)
    const int64_t k = 512;
    IndexTopkArgs ids;
    ids.scores = args[0].scores;
    ids.rows = B;
    ids.entries = E;
    ids.k = k;
    check(cudaMalloc(&ids.picks, size_t(B) * k * 8), "cudaMalloc");
    IndexTopkArgs rows = ids;
    check(cudaMalloc(&rows.picks, size_t(B) * k * 8), "cudaMalloc");
    rows.block_tables = args[0].block_tables;
    rows.block_stride = blocks_per_seq;
    rows.rows_per_seq = 1;
    rows.ratio = ratio;
    check(deepinfer::model::cuda::index_topk(ids, nullptr), "index_topk");
    check(deepinfer::model::cuda::index_topk(rows, nullptr), "index_topk rows");
    std::vector<int64_t> got_ids(size_t(B) * k), got_rows(size_t(B) * k);
    check(cudaMemcpy(got_ids.data(), ids.picks, got_ids.size() * 8, cudaMemcpyDeviceToHost), "copy");
    check(cudaMemcpy(got_rows.data(), rows.picks, got_rows.size() * 8, cudaMemcpyDeviceToHost), "copy");
    size_t differ = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < k; ++j) {
        const int64_t e = got_ids[b * k + j];
        const int64_t want = e < 0 ? -1 : table0[b * blocks_per_seq + e / per_block] * per_block + e % per_block;
        differ += got_rows[b * k + j] != want;
      }
    const double ids_ms = time_median(iters, [&](int64_t, cudaStream_t st) { check(deepinfer::model::cuda::index_topk(ids, st), "topk"); });
    const double rows_ms =
        time_median(iters, [&](int64_t, cudaStream_t st) { check(deepinfer::model::cuda::index_topk(rows, st), "topk"); });
    std::printf("  top-%ld of %ld entries: picks as ids %.1f us, as rows %.1f us; %zu of %zu rows differ from the ids mapped on the host\n",
                long(k), long(E), ids_ms * 1e3, rows_ms * 1e3, differ, got_rows.size());
  }
#ifdef DEEPINFER_MICRO_REFERENCE
  {
    IndexScoresArgs r = args[0];
    const size_t n = size_t(B) * E;
    std::vector<float*> ref_set_scores(sets);  // one a set, as this version's (attention's reference line says why)
    for (auto& o : ref_set_scores) check(cudaMalloc(&o, n * 4), "cudaMalloc");
    float* ref_scores = ref_set_scores[0];
    r.scores = ref_scores;
    check(reference::index_scores(r, nullptr), "reference index_scores");
    check(deepinfer::model::cuda::index_scores(args[0], nullptr), "index_scores");
    check(cudaDeviceSynchronize(), "sync");
    compare(args[0].scores, ref_scores, n, "indexer scores");
    std::vector<IndexScoresArgs> ref_args = args;
    for (int set = 0; set < sets; ++set) ref_args[set].scores = ref_set_scores[set];
    const double ref_ms =
        time_median(iters, [&](int64_t i, cudaStream_t st) { check(reference::index_scores(ref_args[i % sets], st), "reference"); });
    std::printf("  reference median %.1f us (this version %.1f us)\n", ref_ms * 1e3, m * 1e3);
  }
#endif
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  if (what == "attention") return run_attention(argc, argv);
  if (what == "indexer") return run_indexer(argc, argv);
  std::fprintf(stderr,
               "usage: attention_micro attention|indexer [--batch B] [--context C] [--layer csa|hca|swa] [--iters N] [--hot 1] "
               "[--head-split 1] [--pick-rows 1] [--early 1]\n");
  return 2;
}
