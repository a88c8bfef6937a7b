#pragma once
// Job presets (configs/jobs/NAME.json) and their command-line overrides: pool sizes, step
// budgets, the job seed, device and dtype. Every key is optional; unknown keys are errors.
// Owns: the preset format and its defaults. Does not own: what the values do.

#include <cstdint>
#include <optional>
#include <string>

namespace deepinfer::pipeline {

// The accepted range of each integer setting, in a job file and on the command line.
struct IntRange {
  int64_t lo, hi;
};
inline constexpr IntRange kMaxNumSeqsRange{1, 1 << 20}, kMaxNumBatchedTokensRange{1, 1 << 24}, kNumBlocksRange{2, 1 << 30},
    kMaxModelLenRange{2, 1 << 30};

struct JobConfig {
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 4096;
  int32_t num_blocks = 1024;     // KV blocks of model::kBlockTokens tokens, padding block included
  int32_t max_model_len = 8192;  // prompt + output tokens
  uint64_t seed = 0;
  std::string device = "auto";       // auto (cuda if present), cpu, cuda
  std::string dtype = "auto";        // auto (bfloat16 on cuda, float32 on cpu), float32, bfloat16
  bool overlap = true;               // zero-overhead scheduling
  bool cuda_graphs = true;           // decode steps replayed from CUDA graphs (engine/decode_graphs.h)
  bool batch_invariant = false;      // no row's bits depend on its batch (model/batch_invariant.h)
  bool keep_fp8_linears = false;     // FP8 linears held and multiplied as FP8 (model/weights.h), not dequantized at load
  std::optional<double> deadline_s;  // cancel what is left after this many seconds
  double progress_interval_s = 5.0;
  double flush_interval_s = 2.0;  // finished records reach disk at least this often

  // Throws std::invalid_argument naming the file, key and value.
  static JobConfig load(const std::string& path);
  static JobConfig parse(const std::string& json, const std::string& origin);
  void validate() const;
};

}  // namespace deepinfer::pipeline
