#pragma once
// What the kernels' microbenchmarks (tests/model/*_bench.cpp; not tests) share: `--name value`
// options, comma-separated lists, and the timing of one call on the device: a warm-up over every
// copy of the operands, then `iters` calls rotating through them, issued while the GPU is still
// busy with a queue of large matrix products (so the calls run back to back on the device), each
// timed by the CUDA events around it (engine/cuda/kernels.h EventTimeline).

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "engine/cuda/kernels.h"

namespace deepinfer::model::testing::bench {

inline std::string option(int argc, char** argv, const std::string& name, const std::string& fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == "--" + name) return argv[i + 1];
  return fallback;
}

inline std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream list(text);
  for (std::string item; std::getline(list, item, ',');) items.push_back(item);
  return items;
}

inline std::vector<int64_t> int_list(const std::string& text) {
  std::vector<int64_t> values;
  for (const std::string& item : split(text)) values.push_back(std::stoll(item));
  return values;
}

struct Timing {
  double median_ms = 0;
  double min_ms = 0;
  double host_ms = 0;  // host time to issue one call
};

// run(c) issues one call on operand copy c of `copies`.
inline Timing time_calls(const std::function<void(size_t)>& run, size_t copies, int64_t iters, at::Device cuda) {
  Timing t;
  for (size_t c = 0; c < copies; ++c) run(c);
  const at::Tensor busy = at::randn({8192, 8192}, at::TensorOptions().dtype(at::kBFloat16).device(cuda));
  engine::cuda::EventTimeline timeline(cuda);
  for (int r = 0; r < 12; ++r) at::mm(busy, busy);  // ~1.1 TFLOP each: the host gets well ahead
  std::vector<int64_t> marks{timeline.record()};
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < iters; ++i) {
    run(static_cast<size_t>(i) % copies);
    marks.push_back(timeline.record());
  }
  t.host_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / static_cast<double>(iters);
  std::vector<double> ms;
  for (int64_t i = 0; i < iters; ++i) ms.push_back(timeline.elapsed_ms(marks[i], marks[i + 1]));
  std::sort(ms.begin(), ms.end());
  t.median_ms = ms[ms.size() / 2];
  t.min_ms = ms.front();
  return t;
}

}  // namespace deepinfer::model::testing::bench
