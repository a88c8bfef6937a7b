#include "pipeline/job_config.h"

#include <stdexcept>

#include <simdjson.h>

#include "io/durable_file.h"

namespace deepinfer::pipeline {
namespace {

[[noreturn]] void fail(const std::string& origin, std::string_view key, const std::string& what) {
  throw std::invalid_argument(origin + ": '" + std::string(key) + "' " + what);
}

int32_t read_int(const std::string& origin, std::string_view key, simdjson::dom::element value, IntRange range) {
  const int64_t lo = range.lo, hi = range.hi;
  int64_t number;
  if (value.get(number)) fail(origin, key, "must be an integer, got " + simdjson::minify(value));
  if (number < lo || number > hi)
    fail(origin, key, "= " + std::to_string(number) + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return static_cast<int32_t>(number);
}

}  // namespace

JobConfig JobConfig::load(const std::string& path) {
  std::string text;
  try {
    text = io::read_file(path);
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(std::string("job file: ") + e.what());  // a wrong --job is a bad argument
  }
  return parse(text, path);
}

JobConfig JobConfig::parse(const std::string& json, const std::string& origin) {
  simdjson::dom::parser parser;
  simdjson::dom::object object;
  if (auto error = parser.parse(json).get(object))
    throw std::invalid_argument(origin + ": not a JSON object (" + simdjson::error_message(error) + ")");
  JobConfig c;
  for (auto field : object) {
    const std::string_view key = field.key;
    const simdjson::dom::element value = field.value;
    if (key == "max_num_seqs")
      c.max_num_seqs = read_int(origin, key, value, kMaxNumSeqsRange);
    else if (key == "max_num_batched_tokens")
      c.max_num_batched_tokens = read_int(origin, key, value, kMaxNumBatchedTokensRange);
    else if (key == "num_blocks")
      c.num_blocks = read_int(origin, key, value, kNumBlocksRange);
    else if (key == "max_model_len")
      c.max_model_len = read_int(origin, key, value, kMaxModelLenRange);
    else if (key == "seed") {
      uint64_t seed;
      if (value.get(seed)) fail(origin, key, "must be a non-negative integer, got " + simdjson::minify(value));
      c.seed = seed;
    } else if (key == "device" || key == "dtype") {
      std::string_view text;
      if (value.get(text)) fail(origin, key, "must be a string, got " + simdjson::minify(value));
      (key == "device" ? c.device : c.dtype) = std::string(text);
    } else if (key == "overlap" || key == "cuda_graphs" || key == "batch_invariant" || key == "keep_fp8_linears") {
      bool flag;
      if (value.get(flag)) fail(origin, key, "must be true or false, got " + simdjson::minify(value));
      (key == "overlap"           ? c.overlap
       : key == "cuda_graphs"     ? c.cuda_graphs
       : key == "batch_invariant" ? c.batch_invariant
                                  : c.keep_fp8_linears) = flag;
    } else if (key == "deadline_s" || key == "progress_interval_s" || key == "flush_interval_s") {
      double number;
      if (value.is_null()) continue;
      if (value.get(number) || number < 0) fail(origin, key, "must be a non-negative number, got " + simdjson::minify(value));
      if (key == "deadline_s")
        c.deadline_s = number;
      else
        (key == "flush_interval_s" ? c.flush_interval_s : c.progress_interval_s) = number;
    } else if (key == "description") {
      continue;
    } else {
      fail(origin, key,
           "is not a job setting (known: max_num_seqs, max_num_batched_tokens, num_blocks, max_model_len, seed, "
           "device, dtype, overlap, cuda_graphs, batch_invariant, keep_fp8_linears, deadline_s, progress_interval_s, flush_interval_s, "
           "description)");
    }
  }
  c.validate();
  return c;
}

void JobConfig::validate() const {
  if (device != "auto" && device != "cpu" && device != "cuda")
    throw std::invalid_argument("device must be auto, cpu or cuda, got '" + device + "'");
  if (dtype != "auto" && dtype != "float32" && dtype != "bfloat16")
    throw std::invalid_argument("dtype must be auto, float32 or bfloat16, got '" + dtype + "'");
  const auto check = [](const char* name, int64_t value, IntRange range) {
    if (value < range.lo || value > range.hi)
      throw std::invalid_argument(std::string(name) + " = " + std::to_string(value) + " is out of range [" + std::to_string(range.lo) +
                                  ", " + std::to_string(range.hi) + "]");
  };
  check("max_num_seqs", max_num_seqs, kMaxNumSeqsRange);
  check("max_num_batched_tokens", max_num_batched_tokens, kMaxNumBatchedTokensRange);
  check("num_blocks", num_blocks, kNumBlocksRange);
  check("max_model_len", max_model_len, kMaxModelLenRange);
  if (batch_invariant && keep_fp8_linears)
    throw std::invalid_argument(
        "batch_invariant and keep_fp8_linears exclude each other: the FP8 GEMM (cuBLASLt) picks its algorithm from the batch's row "
        "count, so the batch-invariant mode dequantizes FP8 linears at load");
}

}  // namespace deepinfer::pipeline
