#pragma once
// PartTimer: the step breakdown (bench --breakdown, forward_bench --breakdown). A
// model::PartClock that the model and the runner tell where each part of a step starts; it
// adds up, per part and per layer type (SWA, CSA, HCA; "-" outside the layers), the device
// time from one part's start to the next. On CUDA the marks are events on the current stream
// (no host sync per part; a step is read back once the next one starts, or at totals()); on the
// CPU, where ops run synchronously, they are host times.
// Owns: the marks and the sums. Does not own: the step (ModelRunner) or the printing.

#include <ATen/ATen.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/forward_hooks.h"
#include "model/model_config.h"

namespace deepinfer::engine {

namespace cuda {
class EventTimeline;
}

class PartTimer final : public model::PartClock {
 public:
  // layer_types[l]: the kind of layer l (ModelConfig::layer_type). decode_only: steps that are
  // not decode steps (prefill, idle) are dropped at end_step.
  PartTimer(at::Device device, std::vector<model::LayerType> layer_types, bool decode_only = true);
  ~PartTimer() override;

  void enter(model::ForwardPart part, int64_t layer) override;
  void end_step(bool decode) override;
  // Forgets every mark and sum (after a warm-up or a prefill that is not to count).
  void reset();

  struct Row {
    model::ForwardPart part;
    std::string layer_type;  // "SWA", "CSA", "HCA" or "-"
    double ms = 0;           // summed over the steps
  };
  // Per (part, layer type), in part order; waits for the device.
  std::vector<Row> totals();
  int64_t steps();

 private:
  struct Mark {
    model::ForwardPart part;
    int64_t layer;
    int64_t event;  // CUDA: index in the timeline; CPU: unused
    std::chrono::steady_clock::time_point host;
  };
  void settle();  // adds up every finished step's marks

  at::Device device_;
  std::vector<model::LayerType> layer_types_;
  bool decode_only_ = true;
  std::unique_ptr<cuda::EventTimeline> timeline_;
  std::vector<Mark> marks_;  // the steps not yet added up; each ends with an end mark
  size_t settled_steps_ = 0;
  std::vector<std::array<double, 4>> sums_;  // [part][layer type index]
};

}  // namespace deepinfer::engine
