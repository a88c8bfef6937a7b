#include "engine/decode_graphs.h"

#include <algorithm>
#include <array>

namespace deepinfer::engine {

int64_t decode_bucket(int64_t rows) {
  TORCH_CHECK(rows >= 1, "decode_bucket: rows must be >= 1, got ", rows);
  static constexpr std::array<int64_t, 15> kBuckets{1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256};
  for (int64_t b : kBuckets)
    if (rows <= b) return b;
  return (rows + 63) / 64 * 64;
}

int64_t block_bucket(int64_t blocks, int64_t widest) {
  int64_t b = 1;
  while (b < blocks) b *= 2;
  return std::max(blocks, std::min(b, widest));
}

DecodeGraphs::DecodeGraphs(at::Device device, bool enabled) : device_(device), enabled_(enabled && device.is_cuda()) {}

DecodeGraphs::~DecodeGraphs() = default;

SampleResult DecodeGraphs::run(const std::string& key, const void* inputs, int64_t generation, const std::function<SampleResult()>& step) {
  if (!enabled_) {
    ++stats_.eager;
    return step();
  }
  Entry& e = entries_[key];
  if (e.graph && (e.inputs != inputs || e.generation != generation)) {  // the inputs moved: stale
    retired_.push_back(std::move(e.graph));
    e = Entry{};
  }
  if (!e.graph && e.seen++ == 0) {
    ++stats_.eager;
    return step();
  }
  if (!e.graph) {
    if (!pool_) pool_ = cuda::new_graph_pool();
    auto graph = std::make_unique<cuda::CudaGraph>(device_, *pool_);
    graph->capture([&] { e.outputs = step(); });
    e.graph = std::move(graph);
    e.inputs = inputs;
    e.generation = generation;
    ++stats_.captured;
  }
  e.graph->replay();
  ++stats_.replayed;
  return e.outputs;
}

}  // namespace deepinfer::engine
