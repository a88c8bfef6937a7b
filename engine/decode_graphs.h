#pragma once
// DecodeGraphs: pure-decode steps replayed from CUDA graphs (issue 19; design row 8). A decode
// step on CUDA is padded to the shapes of a bucket (decode_bucket() rows, block_bucket() blocks
// per table; the padding rows use block 0 and slot 0, which belong to no sequence, and their
// samples are dropped), whether or not graphs are on, so a step computes the same bits either
// way: graphs replay the kernels the eager step queues, on the same shapes. The graph of a key
// (the bucket and everything else that changes what a step queues: the sampler's hints, stop
// list width, bias count and logprobs) is captured the second time the key is seen (the first
// time runs eagerly and leaves lazily built tables, cuBLAS handles and workspaces in place) and
// replayed from then on. A graph reads its inputs where StepStaging put them when it was captured:
// run() replays only while the staging buffer is the same, and recaptures otherwise. The graphs of
// one DecodeGraphs share a memory pool of their own; a stale graph is retired, not freed, until
// the DecodeGraphs goes (cuda::GraphPool says why).
// Owns: the graphs and their static outputs. Does not own: what a step computes (ModelRunner).

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/cuda/kernels.h"
#include "engine/sampler.h"

namespace deepinfer::engine {

// The smallest of 1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256, then steps of 64,
// that holds `rows` (>= 1).
int64_t decode_bucket(int64_t rows);
// The next power of two >= blocks (>= 1), at most `widest` (the widest table the pool allows).
int64_t block_bucket(int64_t blocks, int64_t widest);

class DecodeGraphs {
 public:
  struct Stats {
    int64_t captured = 0;  // graphs captured
    int64_t replayed = 0;  // steps replayed
    int64_t eager = 0;     // padded decode steps run eagerly (first sight of their key)
  };

  // enabled false: every step runs eagerly (--no-cuda-graphs); device: where graphs are made.
  DecodeGraphs(at::Device device, bool enabled);
  ~DecodeGraphs();

  // Runs the device work of a step of shapes `key` (step queues it on the current stream and
  // returns the sampled outputs) eagerly, captured then replayed, or replayed, as above.
  // `inputs` names the staging buffer the step reads (base address and generation).
  SampleResult run(const std::string& key, const void* inputs, int64_t generation, const std::function<SampleResult()>& step);

  bool enabled() const { return enabled_; }
  const Stats& stats() const { return stats_; }

 private:
  struct Entry {
    int64_t seen = 0;
    const void* inputs = nullptr;
    int64_t generation = -1;
    std::unique_ptr<cuda::CudaGraph> graph;
    SampleResult outputs;  // the captured step's static outputs
  };

  at::Device device_;
  bool enabled_;
  std::optional<cuda::GraphPool> pool_;
  std::map<std::string, Entry> entries_;
  std::vector<std::unique_ptr<cuda::CudaGraph>> retired_;
  Stats stats_;
};

}  // namespace deepinfer::engine
