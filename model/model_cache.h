#pragma once
// ModelCache: the tensors behind block ids and state slots (runtime-design.md §4).
//  - Paged compressed state, addressed through a sequence's block table; block b of the table
//    covers positions [128 b, 128 b + 128), so compressed entry w (ratio m) of a sequence lives
//    in block table[(w m) / 128], row w % (128 / m):
//      compressed[l]  [num_blocks, 128/m, head_dim]        every layer with ratio m > 0
//      index_keys[l]  [num_blocks, 128/m, index_head_dim]  CSA layers (indexer keys)
//  - Per-sequence state in its state slot:
//      window[l]      [num_slots, W, head_dim]   ring of the last W = sliding_window raw KV rows,
//                                                position p at row p % W (every layer)
//      kv_state[l], score_state[l]  [num_slots, c m, c head_dim] float32: the compressor tail in
//                     the official layout (c = 2 for CSA, 1 for HCA). CSA: rows 0..m-1 hold the
//                     last complete window, rows m..2m-1 the open window (row m + p % m); HCA:
//                     row p % m. Scores include the position bias `ape`. Initialized to 0 / -inf.
//      index_kv_state[l], index_score_state[l]  [num_slots, 2m, 2 index_head_dim]  CSA indexer tail
// Block 0 and slot 0 are padding: the forward sends discarded writes there.
// A sequence whose run starts at position 0 never reads its slot, so slots need no reset.
// Owns: allocation and shapes. Does not own: which sequence holds which block or slot.

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "model/model_config.h"

namespace deepinfer::model {

struct CompressorTail {
  at::Tensor kv;     // [num_slots, c m, c d'] float32
  at::Tensor score;  // [num_slots, c m, c d'] float32
};

struct LayerCache {
  at::Tensor window;          // [num_slots, W, head_dim]
  at::Tensor compressed;      // [num_blocks, 128/m, head_dim]; undefined for sliding layers
  at::Tensor index_keys;      // [num_blocks, 128/m, index_head_dim]; CSA only
  CompressorTail tail;        // ratio > 0
  CompressorTail index_tail;  // CSA only
};

class ModelCache final {
 public:
  struct Options {
    int64_t num_blocks = 0;             // including padding block 0
    int64_t num_slots = 0;              // including padding slot 0
    at::ScalarType dtype = at::kFloat;  // KV rows; tails are always float32
    at::Device device = at::kCPU;
  };
  ModelCache(const ModelConfig& config, Options options);

  LayerCache& layer(int64_t index) { return layers_.at(index); }
  const LayerCache& layer(int64_t index) const { return layers_.at(index); }
  int64_t num_blocks() const { return options_.num_blocks; }
  int64_t num_slots() const { return options_.num_slots; }
  at::ScalarType dtype() const { return options_.dtype; }
  int64_t bytes() const;  // total allocated

  // Bytes one block / one slot costs (for sizing the cache from a memory budget).
  static int64_t bytes_per_block(const ModelConfig& config, at::ScalarType dtype);
  static int64_t bytes_per_slot(const ModelConfig& config, at::ScalarType dtype);

 private:
  Options options_;
  std::vector<LayerCache> layers_;
};

}  // namespace deepinfer::model
