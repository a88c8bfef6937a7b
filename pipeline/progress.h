#pragma once
// One rank's progress line. The input is read once, gradually (admission.h), so the number of
// items is not known ahead: the line counts what has been read so far and how far through the
// input's bytes that is, and the ETA extrapolates from the byte fraction:
//   [rank 0] 1200 done (+14 waiting) of 1500 read (62% of input bytes) | in 900 tok/s, out 450 tok/s |
//   blocks 10/63, slots 8/8 | preemptions 0 | ETA 1m05s
// (one line; "(+N waiting)" only while records wait). This rank's items are estimated as read / fraction (the fraction is of the
// whole input, which every rank reads), and the ETA is the rest at this run's rate.
// Owns: the line's format and the reporting interval. Does not own: where the figures come from.

#include <cstdint>
#include <functional>
#include <string>

#include "engine/block_manager.h"
#include "engine/state_manager.h"
#include "pipeline/live_request.h"

namespace deepinfer::pipeline {

struct ProgressFigures {
  int rank = 0;
  double elapsed_s = 0;
  int64_t done = 0;          // records written, those of a resumed run included
  int64_t done_before = 0;   // records the run resumed from
  int64_t waiting = 0;       // finished records waiting for an earlier one (kept in the waiting file)
  int64_t read = 0;          // this rank's items read so far
  int64_t bytes_read = 0;    // of the input, all ranks' items
  int64_t total_bytes = -1;  // -1: unknown (not a regular file): no fraction, no ETA
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  engine::BlockSnapshot blocks;
  engine::SlotSnapshot slots;
  int64_t preemptions = 0;
};

std::string progress_line(const ProgressFigures& figures);

class Progress final {
 public:
  // sink null: no progress at all.
  Progress(std::function<void(const std::string&)> sink, double interval_s);
  // Prints figures() when `interval_s` has passed since the last line, or when final.
  void report(bool final, const std::function<ProgressFigures()>& figures);

 private:
  std::function<void(const std::string&)> sink_;
  double interval_s_;
  Clock::time_point last_;
};

}  // namespace deepinfer::pipeline
