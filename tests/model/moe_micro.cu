// Torch-free microbenchmark and check of the routed-expert FP4 kernels (model/cuda/moe_fp4_gemm.h):
// builds with nvcc alone in seconds, for iterating on the kernels on the GPU machine
// (tests/gpu/moe_micro.sh). One layer at v4-flash-slice's dimensions by default (D 4096, I 2048,
// 256 experts, k 6): random packed FP4 experts (codes uniform, e8m0 scales around
// 2^-log2(sqrt(cols)), as tests/model/fp4_experts_fixture.h draws them), random bf16 x, k
// distinct random experts per token, random routing weights; all drawn on the device.
// Timing: `iters` calls rotating over input sets whose touched experts together exceed the L2
// cache eight times, captured in a CUDA graph and replayed between CUDA events (device time per
// call, launches included, the host's time not counted), a warm-up replay, the median of 5.
// Bytes: the FP4 codes and scales of the distinct experts a set touches; FLOPs 2 x 3 I D per pair.
// Checks, printed per token count: the output is repeatable bit for bit; token 0's row equals its
// row when it runs alone (1 token: the self-routed decode path) bit for bit; with
// -DDEEPINFER_MICRO_REFERENCE and a copy of another revision's kernels compiled with
// -Ddeepinfer=deepinfer_ref, the output against that copy's (max |new - old| / max |old|,
// unequal values) and both timed side by side. Exit 1 when a check fails.
// `--check` instead runs the configurations of tests/model/moe_fp4_cuda_test.cpp (tiny and real
// dimensions, k 2 and 6, 1 to 4,096 tokens, a subrange of owned experts, skewed routings, summed
// and per-slot outputs) against the reference copy bit for bit, and token 0 alone.
//   moe_micro [--tokens 1,64,256,4096] [--iters 20] [--experts 256] [--k 6] [--hidden 4096] [--intermediate 2048]
//   moe_micro --check
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "model/cuda/moe_fp4_gemm.h"

#ifdef DEEPINFER_MICRO_REFERENCE
// The reference copy is compiled with -Ddeepinfer=deepinfer_ref against its own headers; its
// argument struct has the same layout under another name (checked by its size).
namespace deepinfer_ref::model::cuda {
struct MoeFp4Args;
size_t moe_fp4_workspace_bytes(const MoeFp4Args& args);
cudaError_t moe_fp4(const MoeFp4Args& args, cudaStream_t stream);
}  // namespace deepinfer_ref::model::cuda
namespace reference {
size_t moe_fp4_workspace_bytes(const deepinfer::model::cuda::MoeFp4Args& a) {
  return deepinfer_ref::model::cuda::moe_fp4_workspace_bytes(reinterpret_cast<const deepinfer_ref::model::cuda::MoeFp4Args&>(a));
}
cudaError_t moe_fp4(const deepinfer::model::cuda::MoeFp4Args& a, cudaStream_t stream) {
  return deepinfer_ref::model::cuda::moe_fp4(reinterpret_cast<const deepinfer_ref::model::cuda::MoeFp4Args&>(a), stream);
}
}  // namespace reference
#endif

#ifdef DEEPINFER_MOE_TRACE
namespace deepinfer::model::cuda {
void moe_fp4_trace_report();  // model/cuda/moe_fp4_decode.cu, built with -DDEEPINFER_MOE_TRACE=1
}
#endif

namespace {

using deepinfer::model::cuda::MoeFp4Args;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "moe_micro: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

std::string option(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == std::string("--") + name) return argv[i + 1];
  return fallback;
}

__device__ uint64_t mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 32);
}

// Uniform bytes in [lo, lo + span).
__global__ void fill_bytes(uint8_t* p, size_t n, uint64_t seed, int lo, int span) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    p[i] = static_cast<uint8_t>(lo + mix((i + 1) * 0x9E3779B97F4A7C15ull ^ seed) % span);
}

// Roughly unit normal bf16 (a sum of four uniforms).
__global__ void fill_normal(__nv_bfloat16* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t x = mix((i + 1) * 0x9E3779B97F4A7C15ull ^ seed);
    float s = 0.0f;
    for (int q = 0; q < 4; ++q) s += static_cast<float>((x >> (16 * q)) & 0xFFFF) / 65536.0f - 0.5f;
    p[i] = __float2bfloat16_rn(s * 1.7320508f);
  }
}

template <typename T>
T* device_alloc(size_t n) {
  T* p = nullptr;
  check(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)), "cudaMalloc");
  return p;
}

template <typename T>
T* device_copy(const std::vector<T>& host) {
  T* p = device_alloc<T>(host.size());
  check(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  return p;
}

struct Experts {
  uint64_t *w13_packed, *w13_scale, *w2_packed, *w2_scale;  // device pointer tables
  double bytes_per_expert;
};

Experts random_experts(int64_t E, int64_t D, int64_t I) {
  std::vector<uint64_t> w13p(2 * E), w13s(2 * E), w2p(E), w2s(E);
  const auto matrix = [&](int64_t rows, int64_t cols, uint64_t seed, uint64_t& packed, uint64_t& scale) {
    uint8_t* p = device_alloc<uint8_t>(rows * cols / 2);
    uint8_t* s = device_alloc<uint8_t>(rows * cols / 32);
    const int center = 127 - static_cast<int>(std::lround(std::log2(std::sqrt(static_cast<double>(cols)))));
    fill_bytes<<<1024, 256>>>(p, rows * cols / 2, seed, 0, 256);
    fill_bytes<<<256, 256>>>(s, rows * cols / 32, seed ^ 0x5555, center - 2, 4);
    check(cudaGetLastError(), "fill");
    packed = reinterpret_cast<uint64_t>(p);
    scale = reinterpret_cast<uint64_t>(s);
  };
  for (int64_t e = 0; e < E; ++e) {
    matrix(I, D, 3 * e + 1, w13p[2 * e], w13s[2 * e]);
    matrix(I, D, 3 * e + 2, w13p[2 * e + 1], w13s[2 * e + 1]);
    matrix(D, I, 3 * e + 3, w2p[e], w2s[e]);
  }
  return {device_copy(w13p), device_copy(w13s), device_copy(w2p), device_copy(w2s), 3.0 * I * D / 2 + 3.0 * I * D / 32};
}

struct Set {
  __nv_bfloat16* x;
  int64_t* experts;
  float* weights;
  std::set<int64_t> touched;
};

// k distinct experts per token; with hot > 0 each pick is among the first `hot` experts with
// probability 3/4 (skewed counts: a few experts get most rows, over 128 each at 300 tokens).
Set random_set(int64_t tokens, int64_t D, int64_t E, int64_t k, std::mt19937_64& rng, int64_t hot = 0) {
  Set s;
  s.x = device_alloc<__nv_bfloat16>(tokens * D);
  fill_normal<<<1024, 256>>>(s.x, tokens * D, rng());
  check(cudaGetLastError(), "fill");
  std::vector<int64_t> ids(tokens * k);
  std::vector<float> w(tokens * k);
  std::uniform_real_distribution<float> uniform(0.05f, 1.0f);
  for (int64_t t = 0; t < tokens; ++t) {
    std::set<int64_t> picked;
    while (static_cast<int64_t>(picked.size()) < k)
      picked.insert(static_cast<int64_t>(hot > 0 && static_cast<int64_t>(picked.size()) < hot && rng() % 4 != 0 ? rng() % hot : rng() % E));
    std::vector<int64_t> order(picked.begin(), picked.end());
    std::shuffle(order.begin(), order.end(), rng);
    for (int64_t s2 = 0; s2 < k; ++s2) {
      ids[t * k + s2] = order[s2];
      w[t * k + s2] = uniform(rng);
      s.touched.insert(order[s2]);
    }
  }
  s.experts = device_copy(ids);
  s.weights = device_copy(w);
  return s;
}

// A call's arguments for experts [first, first + owned) of `ex` (no inputs, workspace or output yet).
MoeFp4Args layer_args(const Experts& ex, int64_t D, int64_t I, int64_t k, int64_t tokens, int64_t first, int64_t owned) {
  MoeFp4Args a;
  a.w13_packed = ex.w13_packed + 2 * first;
  a.w13_scale = ex.w13_scale + 2 * first;
  a.w2_packed = ex.w2_packed + first;
  a.w2_scale = ex.w2_scale + first;
  a.tokens = tokens;
  a.k = k;
  a.hidden = D;
  a.intermediate = I;
  a.first_expert = first;
  a.num_experts = owned;
  a.swiglu_limit = 10.0f;
  return a;
}

using Call = cudaError_t (*)(const MoeFp4Args&, cudaStream_t);

// Median device time of one call over 5 replays of a graph of `iters` calls rotating over `args`.
double time_calls(Call call, const std::vector<MoeFp4Args>& args, int iters, cudaStream_t stream) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "capture");
  for (int i = 0; i < iters; ++i) check(call(args[i % args.size()], stream), "moe_fp4 (captured)");
  check(cudaStreamEndCapture(stream, &graph), "end capture");
  check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  check(cudaGraphLaunch(exec, stream), "warm-up");
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  std::vector<float> ms;
  for (int r = 0; r < 5; ++r) {
    check(cudaEventRecord(a, stream), "record");
    check(cudaGraphLaunch(exec, stream), "replay");
    check(cudaEventRecord(b, stream), "record");
    check(cudaEventSynchronize(b), "sync");
    float m = 0;
    check(cudaEventElapsedTime(&m, a, b), "elapsed");
    ms.push_back(m / iters);
  }
  std::sort(ms.begin(), ms.end());
  check(cudaGraphExecDestroy(exec), "destroy");
  check(cudaGraphDestroy(graph), "destroy");
  return ms[2] * 1e-3;
}

std::vector<float> run_once(Call call, MoeFp4Args a, int64_t rows, cudaStream_t stream) {
  const size_t n = rows * a.hidden * (a.per_slot ? a.k : 1);
  check(cudaMemsetAsync(a.out, 0xFF, n * sizeof(float), stream), "poison");  // NaN: an unwritten value shows
  check(call(a, stream), "moe_fp4");
  check(cudaStreamSynchronize(stream), "sync");
  std::vector<float> host(n);
  check(cudaMemcpy(host.data(), a.out, n * sizeof(float), cudaMemcpyDeviceToHost), "copy out");
  return host;
}

#ifdef DEEPINFER_MICRO_REFERENCE
// One configuration against the reference copy, bit for bit, the sum over slots and the per-slot
// output both: owned experts [first, first + owned) of E, `hot` as random_set; then token 0 alone
// against its row in the batch. Returns whether both hold.
bool check_config(int64_t D, int64_t I, int64_t E, int64_t k, int64_t tokens, int64_t first, int64_t owned, int64_t hot,
                  cudaStream_t stream, std::mt19937_64& rng) {
  static std::vector<std::pair<std::string, Experts>> cache;  // experts per (D, I, E)
  const std::string key = std::to_string(D) + "x" + std::to_string(I) + "x" + std::to_string(E);
  const Experts* ex = nullptr;
  for (const auto& [name, e] : cache)
    if (name == key) ex = &e;
  if (ex == nullptr) {
    cache.emplace_back(key, random_experts(E, D, I));
    ex = &cache.back().second;
  }
  Set set = random_set(tokens, D, E, k, rng, hot);
  MoeFp4Args a = layer_args(*ex, D, I, k, tokens, first, owned);
  a.x = set.x;
  a.experts = set.experts;
  a.routing_weights = set.weights;
  bool ok = true;
  for (const bool per_slot : {false, true}) {
    a.per_slot = per_slot;
    const size_t bytes = std::max(deepinfer::model::cuda::moe_fp4_workspace_bytes(a), reference::moe_fp4_workspace_bytes(a));
    a.workspace = device_alloc<uint8_t>(bytes);
    a.out = device_alloc<float>(tokens * D * (per_slot ? k : 1));
    const std::vector<float> mine = run_once(deepinfer::model::cuda::moe_fp4, a, tokens, stream);
    const std::vector<float> ref = run_once(reference::moe_fp4, a, tokens, stream);
    size_t unequal = 0, nan = 0;
    for (size_t i = 0; i < mine.size(); ++i) {
      unequal += std::memcmp(&mine[i], &ref[i], sizeof(float)) != 0 ? 1 : 0;
      nan += std::isnan(mine[i]) ? 1 : 0;
    }
    bool alone_ok = true;
    if (!per_slot) {
      MoeFp4Args one = a;
      one.tokens = 1;
      float* row = device_alloc<float>(D);
      one.out = row;
      const std::vector<float> single = run_once(deepinfer::model::cuda::moe_fp4, one, 1, stream);
      alone_ok = std::equal(single.begin(), single.end(), mine.begin());
      check(cudaFree(row), "free");
    }
    std::printf(
        "  check D %5ld I %5ld E %3ld owned [%3ld, %3ld) k %ld tokens %5ld hot %ld %s: %zu of %zu values differ from the reference, "
        "%zu NaN%s\n",
        long(D), long(I), long(E), long(first), long(first + owned), long(k), long(tokens), long(hot), per_slot ? "per slot" : "summed  ",
        unequal, mine.size(), nan,
        per_slot   ? ""
        : alone_ok ? "; token 0 alone: same bits"
                   : "; token 0 alone: DIFFERENT");
    ok = ok && unequal == 0 && nan == 0 && alone_ok;
    check(cudaFree(a.workspace), "free");
    check(cudaFree(a.out), "free");
  }
  check(cudaFree(set.x), "free");
  check(cudaFree(set.experts), "free");
  check(cudaFree(set.weights), "free");
  return ok;
}

// The configurations of tests/model/moe_fp4_cuda_test.cpp, against the reference copy.
bool check_all(cudaStream_t stream) {
  std::mt19937_64 rng(11);
  bool ok = true;
  for (const int64_t k : {2, 6})
    for (const int64_t tokens : {1, 7, 64, 300}) {
      ok = check_config(256, 128, 32, k, tokens, 0, 32, 0, stream, rng) && ok;
      ok = check_config(256, 128, 32, k, tokens, 5, 16, 0, stream, rng) && ok;
      ok = check_config(256, 128, 32, k, tokens, 0, 32, k, stream, rng) && ok;
    }
  for (const int64_t tokens : {1, 7, 64, 300, 4096}) {
    ok = check_config(4096, 2048, 256, 6, tokens, 0, 256, 0, stream, rng) && ok;
    ok = check_config(4096, 2048, 256, 6, tokens, 64, 128, 0, stream, rng) && ok;
  }
  ok = check_config(4096, 2048, 256, 6, 4096, 0, 256, 8, stream, rng) && ok;
  ok = check_config(384, 384, 16, 6, 300, 0, 16, 6, stream, rng) && ok;  // three superblocks: not a multiple of the prefetch
  std::printf("moe_micro --check: %s\n", ok ? "every configuration bit for bit the reference's" : "CHECKS FAILED");
  return ok;
}
#endif

int run(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("moe_micro: no CUDA device; nothing measured\n");
    return 0;
  }
  const int64_t E = std::stoll(option(argc, argv, "experts", "256")), k = std::stoll(option(argc, argv, "k", "6"));
  const int64_t D = std::stoll(option(argc, argv, "hidden", "4096")), I = std::stoll(option(argc, argv, "intermediate", "2048"));
  const int iters = std::stoi(option(argc, argv, "iters", "20"));
  std::vector<int64_t> token_counts;
  std::stringstream list(option(argc, argv, "tokens", "1,64,256,4096"));
  for (std::string item; std::getline(list, item, ',');) token_counts.push_back(std::stoll(item));
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
#ifdef DEEPINFER_MICRO_REFERENCE
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--check") return check_all(stream) ? 0 : 1;
#endif
  const Experts experts = random_experts(E, D, I);
  std::mt19937_64 rng(7);
  bool ok = true;
  for (const int64_t tokens : token_counts) {
    std::vector<Set> sets;
    double touched = 0;
    while (sets.size() < 2 || (touched < 8.0 * (50 << 20) && sets.size() < 16)) {
      sets.push_back(random_set(tokens, D, E, k, rng));
      touched += sets.back().touched.size() * experts.bytes_per_expert;
    }
    const MoeFp4Args base = layer_args(experts, D, I, k, tokens, 0, E);
    size_t workspace = deepinfer::model::cuda::moe_fp4_workspace_bytes(base);
#ifdef DEEPINFER_MICRO_REFERENCE
    workspace = std::max(workspace, reference::moe_fp4_workspace_bytes(base));
#endif
    std::vector<MoeFp4Args> args;
    for (const Set& s : sets) {
      MoeFp4Args a = base;
      a.x = s.x;
      a.experts = s.experts;
      a.routing_weights = s.weights;
      a.workspace = device_alloc<uint8_t>(workspace);
      a.out = device_alloc<float>(tokens * D);
      args.push_back(a);
    }
    const double bytes = touched / sets.size(), flops = 2.0 * tokens * k * 3.0 * I * D;
    const std::vector<float> out = run_once(deepinfer::model::cuda::moe_fp4, args[0], tokens, stream);
    const bool repeatable = out == run_once(deepinfer::model::cuda::moe_fp4, args[0], tokens, stream);
    size_t nan = 0;
    for (const float v : out) nan += std::isnan(v) ? 1 : 0;
    // Token 0 alone: its x row, experts and weights are the first of the set's arrays.
    MoeFp4Args alone = args[0];
    alone.tokens = 1;
    alone.out = device_alloc<float>(D);
    const std::vector<float> single = run_once(deepinfer::model::cuda::moe_fp4, alone, 1, stream);
    const bool invariant = std::equal(single.begin(), single.end(), out.begin());
    const double t = time_calls(deepinfer::model::cuda::moe_fp4, args, iters, stream);
#ifdef DEEPINFER_MOE_TRACE
    deepinfer::model::cuda::moe_fp4_trace_report();
#endif
    std::printf("moe_micro: D %ld, I %ld, %ld experts, k %ld, %ld tokens: %.1f experts touched per set (%zu sets), %.3f GB of FP4\n",
                long(D), long(I), long(E), long(k), long(tokens), bytes / experts.bytes_per_expert, sets.size(), bytes / 1e9);
    std::printf("  this version   %9.1f us  %6.0f GB/s = %5.1f%% of 4.3 TB/s  %6.1f TFLOP/s = %5.1f%% of 790\n", t * 1e6, bytes / t / 1e9,
                100.0 * bytes / t / 4.3e12, flops / t / 1e12, 100.0 * flops / t / 790e12);
    std::printf("  repeatable bit for bit: %s; NaN (unwritten) values: %zu; token 0 alone == in the batch bit for bit: %s\n",
                repeatable ? "yes" : "NO", nan, invariant ? "yes" : "NO");
    ok = ok && repeatable && nan == 0 && invariant;
#ifdef DEEPINFER_MICRO_REFERENCE
    const std::vector<float> ref = run_once(reference::moe_fp4, args[0], tokens, stream);
    double diff = 0, scale = 0;
    size_t unequal = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      diff = std::max(diff, static_cast<double>(std::fabs(out[i] - ref[i])));
      scale = std::max(scale, static_cast<double>(std::fabs(ref[i])));
      unequal += out[i] != ref[i] ? 1 : 0;
    }
    const double rt = time_calls(reference::moe_fp4, args, iters, stream);
    std::printf("  reference      %9.1f us  %6.0f GB/s = %5.1f%% of 4.3 TB/s  %6.1f TFLOP/s\n", rt * 1e6, bytes / rt / 1e9,
                100.0 * bytes / rt / 4.3e12, flops / rt / 1e12);
    std::printf("  vs reference: max|diff|/max|ref| %.3e, %zu of %zu values differ\n", diff / scale, unequal, out.size());
    ok = ok && diff / scale <= 1e-2;
#endif
    for (MoeFp4Args& a : args) {
      check(cudaFree(a.workspace), "free");
      check(cudaFree(a.out), "free");
    }
    check(cudaFree(alone.out), "free");
    for (Set& s : sets) {
      check(cudaFree(s.x), "free");
      check(cudaFree(s.experts), "free");
      check(cudaFree(s.weights), "free");
    }
  }
  std::printf("moe_micro: %s\n", ok ? "all checks passed" : "CHECKS FAILED");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return run(argc, argv); }
