#include "engine/part_timer.h"

#include "engine/cuda/kernels.h"

namespace deepinfer::engine {
namespace {

constexpr size_t kSettleMarks = 8192;  // marks kept before the finished steps are read back
constexpr model::ForwardPart kEndMark = model::ForwardPart::kCount;
constexpr const char* kTypeNames[4] = {"SWA", "CSA", "HCA", "-"};

}  // namespace

PartTimer::PartTimer(at::Device device, std::vector<model::LayerType> layer_types, bool decode_only)
    : device_(device),
      layer_types_(std::move(layer_types)),
      decode_only_(decode_only),
      sums_(static_cast<size_t>(model::ForwardPart::kCount), std::array<double, 4>{}) {
  if (device_.is_cuda()) timeline_ = std::make_unique<cuda::EventTimeline>(device_);
}

PartTimer::~PartTimer() = default;

void PartTimer::enter(model::ForwardPart part, int64_t layer) {
  if (part == model::ForwardPart::kStaging && marks_.size() >= kSettleMarks) settle();
  const int64_t event = timeline_ ? timeline_->record() : 0;
  marks_.push_back(Mark{part, layer, event, std::chrono::steady_clock::now()});
}

void PartTimer::end_step(bool decode) {
  if (decode || !decode_only_) {
    enter(kEndMark, -1);
    return;
  }
  while (!marks_.empty() && marks_.back().part != kEndMark) marks_.pop_back();  // the step's marks (its events stay unread)
}

void PartTimer::settle() {
  // Finished steps: the marks up to the last end mark; an unfinished step's marks stay.
  size_t finished = marks_.size();
  while (finished > 0 && marks_[finished - 1].part != kEndMark) --finished;
  for (size_t i = 0; i < finished; ++i) {
    const Mark& mark = marks_[i];
    if (mark.part == kEndMark) {
      ++settled_steps_;
      continue;
    }
    const Mark& next = marks_[i + 1];
    const double ms = timeline_ ? timeline_->elapsed_ms(mark.event, next.event)
                                : std::chrono::duration<double, std::milli>(next.host - mark.host).count();
    const bool in_layer = mark.layer >= 0 && mark.layer < static_cast<int64_t>(layer_types_.size());
    const size_t type = in_layer ? static_cast<size_t>(layer_types_[static_cast<size_t>(mark.layer)]) : 3;
    sums_[static_cast<size_t>(mark.part)][type] += ms;
  }
  marks_.erase(marks_.begin(), marks_.begin() + static_cast<std::ptrdiff_t>(finished));
  if (timeline_ && marks_.empty()) timeline_->clear();  // events are reused once no kept mark names one
}

void PartTimer::reset() {
  marks_.clear();
  if (timeline_) timeline_->clear();
  settled_steps_ = 0;
  for (auto& row : sums_) row.fill(0);
}

std::vector<PartTimer::Row> PartTimer::totals() {
  settle();
  std::vector<Row> rows;
  for (size_t part = 0; part < sums_.size(); ++part) {
    for (size_t type = 0; type < 4; ++type) {
      if (sums_[part][type] > 0) rows.push_back(Row{static_cast<model::ForwardPart>(part), kTypeNames[type], sums_[part][type]});
    }
  }
  return rows;
}

int64_t PartTimer::steps() {
  settle();
  return static_cast<int64_t>(settled_steps_);
}

}  // namespace deepinfer::engine
