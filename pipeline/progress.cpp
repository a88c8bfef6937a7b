#include "pipeline/progress.h"

#include <algorithm>
#include <cstdio>

namespace deepinfer::pipeline {
namespace {

std::string format_duration(double seconds) {
  char text[32];
  const auto s = static_cast<int64_t>(seconds);
  if (s >= 3600)
    std::snprintf(text, sizeof(text), "%ldh%02ldm", long(s / 3600), long(s / 60 % 60));
  else
    std::snprintf(text, sizeof(text), "%ldm%02lds", long(s / 60), long(s % 60));
  return text;
}

// The input's fraction read, or -1 when its size is unknown.
double byte_fraction(const ProgressFigures& f) {
  if (f.total_bytes <= 0) return f.total_bytes == 0 ? 1.0 : -1.0;
  return std::min(1.0, static_cast<double>(f.bytes_read) / static_cast<double>(f.total_bytes));
}

std::string eta(const ProgressFigures& f, double fraction) {
  const double rate = (f.done - f.done_before) / std::max(f.elapsed_s, 1e-9);
  if (fraction <= 0 || rate <= 0) return "?";
  const double expected = static_cast<double>(f.read) / fraction;  // this rank's items, estimated
  return format_duration(std::max(0.0, expected - static_cast<double>(f.done)) / rate);
}

}  // namespace

std::string progress_line(const ProgressFigures& f) {
  const double fraction = byte_fraction(f);
  const double elapsed = std::max(f.elapsed_s, 1e-9);
  char read[64] = "";
  if (fraction >= 0) std::snprintf(read, sizeof(read), " (%.0f%% of input bytes)", 100 * fraction);
  char waiting[48] = "";
  if (f.waiting > 0) std::snprintf(waiting, sizeof(waiting), " (+%ld waiting)", long(f.waiting));
  char line[512];
  std::snprintf(line, sizeof(line),
                "[rank %d] %ld done%s of %ld read%s | in %.0f tok/s, out %.0f tok/s | blocks %d/%d, slots %d/%d | preemptions %ld | ETA %s",
                f.rank, long(f.done), waiting, long(f.read), read, f.prompt_tokens / elapsed, f.output_tokens / elapsed, f.blocks.num_used,
                f.blocks.num_usable, f.slots.num_used, f.slots.num_usable, long(f.preemptions), eta(f, fraction).c_str());
  return line;
}

Progress::Progress(std::function<void(const std::string&)> sink, double interval_s)
    : sink_(std::move(sink)), interval_s_(interval_s), last_(Clock::now()) {}

void Progress::report(bool final, const std::function<ProgressFigures()>& figures) {
  if (!sink_ || (!final && std::chrono::duration<double>(Clock::now() - last_).count() < interval_s_)) return;
  last_ = Clock::now();
  sink_(progress_line(figures()));
}

}  // namespace deepinfer::pipeline
