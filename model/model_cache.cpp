#include "model/model_cache.h"

#include <limits>

namespace deepinfer::model {
namespace {

CompressorTail make_tail(int64_t slots, int64_t rows, int64_t width, at::Device device) {
  const auto options = at::TensorOptions().dtype(at::kFloat).device(device);
  return CompressorTail{at::zeros({slots, rows, width}, options),
                        at::full({slots, rows, width}, -std::numeric_limits<float>::infinity(), options)};
}

int64_t tensor_bytes(const at::Tensor& t) { return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0; }

}  // namespace

ModelCache::ModelCache(const ModelConfig& config, Options options) : options_(options) {
  config.validate();
  TORCH_CHECK(options_.num_blocks >= 1 && options_.num_slots >= 1, "ModelCache: need at least the padding block and slot, got ",
              options_.num_blocks, " blocks and ", options_.num_slots, " slots");
  const auto kv = at::TensorOptions().dtype(options_.dtype).device(options_.device);
  for (int64_t l = 0; l < config.num_layers; ++l) {
    LayerCache layer;
    layer.window = at::zeros({options_.num_slots, config.sliding_window, config.head_dim}, kv);
    const int64_t ratio = config.compress_ratio(l);
    if (ratio > 0) {
      const int64_t c = config.compress_overlap(l);
      layer.compressed = at::zeros({options_.num_blocks, kBlockTokens / ratio, config.head_dim}, kv);
      layer.tail = make_tail(options_.num_slots, c * ratio, c * config.head_dim, options_.device);
    }
    if (config.layer_type(l) == LayerType::kCsa) {
      layer.index_keys = at::zeros({options_.num_blocks, kBlockTokens / ratio, config.index_head_dim}, kv);
      layer.index_tail = make_tail(options_.num_slots, 2 * ratio, 2 * config.index_head_dim, options_.device);
    }
    layers_.push_back(std::move(layer));
  }
}

int64_t ModelCache::bytes() const {
  int64_t total = 0;
  for (const LayerCache& l : layers_) {
    total += tensor_bytes(l.window) + tensor_bytes(l.compressed) + tensor_bytes(l.index_keys) + tensor_bytes(l.tail.kv) +
             tensor_bytes(l.tail.score) + tensor_bytes(l.index_tail.kv) + tensor_bytes(l.index_tail.score);
  }
  return total;
}

int64_t ModelCache::bytes_per_block(const ModelConfig& config, at::ScalarType dtype) {
  const int64_t size = static_cast<int64_t>(c10::elementSize(dtype));
  int64_t total = 0;
  for (int64_t l = 0; l < config.num_layers; ++l) {
    const int64_t ratio = config.compress_ratio(l);
    if (ratio == 0) continue;
    total += kBlockTokens / ratio * config.head_dim * size;
    if (config.layer_type(l) == LayerType::kCsa) total += kBlockTokens / ratio * config.index_head_dim * size;
  }
  return total;
}

int64_t ModelCache::bytes_per_slot(const ModelConfig& config, at::ScalarType dtype) {
  const int64_t size = static_cast<int64_t>(c10::elementSize(dtype));
  int64_t total = 0;
  for (int64_t l = 0; l < config.num_layers; ++l) {
    total += config.sliding_window * config.head_dim * size;
    const int64_t ratio = config.compress_ratio(l);
    const int64_t c = config.compress_overlap(l);
    total += 2 * c * ratio * c * config.head_dim * 4;
    if (config.layer_type(l) == LayerType::kCsa) total += 2 * 2 * ratio * 2 * config.index_head_dim * 4;
  }
  return total;
}

}  // namespace deepinfer::model
