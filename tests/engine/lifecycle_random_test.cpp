// The randomized lifecycle test: thousands of random workloads (pool shapes from tiny to large,
// prompt and output lengths, gradual arrivals, bad requests, random cancellations and external
// stops, overlap on and off) driven through Scheduler + FakeExecutor. After every schedule()
// and process() the scheduler's invariants are checked; each output is checked from the
// outside; stale results are poisoned so committing one would show in the tokens; at the end
// every request must have finished with the oracle's reason and tokens and the pools must be full.
//
// Replay one workload:   DEEPINFER_ENGINE_SEED=<seed> build/tests/engine_core_tests --gtest_filter='LifecycleRandom*'
// Run more workloads:    DEEPINFER_ENGINE_WORKLOADS=<n> ...

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/engine/engine_core_test_util.h"

namespace deepinfer::engine {
namespace {

using testing::expected_run;
using testing::make_executor;

constexpr int32_t kPoison = 1'000'000;  // never produced by the oracle (vocab < 100)

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  int32_t uniform(int32_t lo, int32_t hi) {  // [lo, hi]
    return lo + static_cast<int32_t>(engine_() % static_cast<uint64_t>(hi - lo + 1));
  }
  bool chance(double p) { return static_cast<double>(engine_() % 1'000'000) < p * 1'000'000.0; }
  uint64_t next() { return engine_(); }

 private:
  std::mt19937_64 engine_;
};

struct Request {
  std::vector<int32_t> prompt;
  SamplingParams params;
  int64_t arrival_step = 0;
};

struct Workload {
  uint64_t seed = 0;
  Scheduler::Options options;
  bool overlap = false;
  int32_t vocab_size = 16;
  double cancel_rate = 0.0;
  std::vector<Request> requests;

  std::string describe() const {
    std::ostringstream os;
    os << "block_size=" << options.block_size << " num_blocks=" << options.num_blocks << " num_slots=" << options.num_slots
       << " max_num_seqs=" << options.max_num_seqs << " max_num_batched_tokens=" << options.max_num_batched_tokens
       << " max_model_len=" << options.max_model_len << " watermark=" << options.watermark_blocks << " overlap=" << overlap
       << " vocab=" << vocab_size << " cancel_rate=" << cancel_rate << " requests=" << requests.size();
    return os.str();
  }
};

Workload make_workload(uint64_t seed) {
  Rng rng(seed * 0x9e3779b97f4a7c15ULL + 1);
  Workload w;
  w.seed = seed;
  w.overlap = seed % 2 == 1;
  Scheduler::Options& o = w.options;
  const int32_t block_sizes[] = {1, 2, 3, 4, 8, 16};
  o.block_size = block_sizes[rng.uniform(0, 5)];
  switch (rng.uniform(0, 2)) {  // pool: tiny, small, large
    case 0: o.num_blocks = rng.uniform(2, 6); break;
    case 1: o.num_blocks = rng.uniform(7, 24); break;
    default: o.num_blocks = rng.uniform(64, 256); break;
  }
  o.num_slots = rng.chance(0.3) ? rng.uniform(2, 4) : rng.uniform(5, 40);
  o.max_num_seqs = rng.uniform(1, 12);
  switch (rng.uniform(0, 2)) {
    case 0: o.max_num_batched_tokens = rng.uniform(1, 8); break;
    case 1: o.max_num_batched_tokens = rng.uniform(9, 64); break;
    default: o.max_num_batched_tokens = rng.uniform(65, 512); break;
  }
  o.max_model_len = rng.chance(0.3) ? rng.uniform(2, 24) : rng.uniform(25, 160);
  o.eos_token_id = rng.chance(0.9) ? 0 : -1;
  const int32_t usable = o.num_blocks - 1;
  o.watermark_blocks = usable > 2 && rng.chance(0.3) ? rng.uniform(1, std::min(usable - 1, 4)) : 0;
  w.vocab_size = rng.uniform(6, 64);
  const double cancel_rates[] = {0.0, 0.0, 0.02, 0.1};
  w.cancel_rate = cancel_rates[rng.uniform(0, 3)];

  const int32_t num_requests = rng.uniform(1, 24);
  const int32_t max_len = std::min(o.max_model_len, usable * o.block_size);
  for (int32_t i = 0; i < num_requests; ++i) {
    Request r;
    int32_t len = rng.chance(0.05) ? rng.uniform(max_len, max_len + 10)  // too long: error
                                   : rng.uniform(1, std::max(1, std::min(60, max_len - 1)));
    if (rng.chance(0.02)) len = 0;  // empty: error
    for (int32_t t = 0; t < len; ++t) r.prompt.push_back(rng.uniform(0, w.vocab_size - 1));
    r.params.max_tokens = rng.chance(0.2) ? rng.uniform(1, 3) : rng.uniform(1, 48);
    r.params.seed = rng.next();
    r.params.ignore_eos = rng.chance(0.25);
    if (rng.chance(0.3)) r.params.min_tokens = rng.uniform(0, r.params.max_tokens);
    if (rng.chance(0.3)) r.params.stop_token_ids = {rng.uniform(0, w.vocab_size - 1)};
    if (rng.chance(0.03)) r.params.temperature = -1.0f;  // invalid: error
    r.arrival_step = rng.chance(0.5) ? 0 : rng.uniform(0, 40);
    w.requests.push_back(std::move(r));
  }
  return w;
}

struct Stats {
  int64_t workloads = 0, steps = 0, preemptions = 0, discarded = 0, cancels = 0, pending_cancels = 0;
  int64_t errors = 0, tokens = 0;
};

void fail(const std::string& what) { throw std::logic_error(what); }

// Checks a SchedulerOutput from the outside (without trusting the scheduler's own checks).
void check_output(const Scheduler& scheduler, const SchedulerOutput& out, int64_t expected_step, std::vector<SeqId>& first_admissions,
                  std::set<SeqId>& ever_scheduled) {
  const Scheduler::Options& o = scheduler.options();
  if (out.step != expected_step) fail("step index " + std::to_string(out.step));
  if ((out.kind == StepKind::kIdle) != out.seqs.empty()) fail("idle kind mismatch");
  if (static_cast<int32_t>(out.seqs.size()) > o.max_num_seqs) fail("more rows than max_num_seqs");
  int32_t tokens = 0;
  std::set<SeqId> ids;
  std::set<int32_t> blocks, slots;
  for (const ScheduledSeq& row : out.seqs) {
    tokens += row.num_query_tokens;
    if (!ids.insert(row.seq_id).second) fail("seq twice in one step");
    if (!slots.insert(row.state_slot).second || row.state_slot == kPaddingSlot) fail("slot shared or padding");
    for (int32_t b : row.block_table) {
      if (b == kPaddingBlock || !blocks.insert(b).second) fail("block shared or padding: " + std::to_string(b));
    }
    const Sequence* seq = scheduler.find(row.seq_id);
    if (seq == nullptr) fail("scheduled an unknown seq");
    if (out.kind == StepKind::kDecode) {
      if (row.num_query_tokens != 1 || !row.sample) fail("decode row is not one sampled token");
    } else {
      for (int32_t t : row.query_token_ids) {
        if (t == kPendingToken) fail("prefill with a pending token");
      }
      const bool last_chunk = row.start_pos + row.num_query_tokens == seq->num_tokens();
      if (row.sample != last_chunk) fail("sampling a prefill chunk that is not the last (or not the last one)");
      if (row.start_pos == 0 && ever_scheduled.insert(row.seq_id).second) first_admissions.push_back(row.seq_id);
    }
    if (static_cast<int64_t>(row.block_table.size()) * o.block_size < row.start_pos + row.num_query_tokens) {
      fail("block table too short");
    }
  }
  if (tokens != out.num_batched_tokens || tokens > o.max_num_batched_tokens) fail("token budget");
  for (size_t i = 1; i < first_admissions.size(); ++i) {
    if (first_admissions[i] <= first_admissions[i - 1]) fail("FCFS violated: first admissions out of order");
  }
}

void run_workload(const Workload& w, Stats& stats) {
  Scheduler scheduler(w.options);
  FakeExecutor executor = make_executor(w.options, w.vocab_size, w.overlap);
  Rng rng(w.seed ^ 0xabcdef);
  std::map<size_t, SeqId> ids;  // request index -> seq id
  std::map<SeqId, size_t> index_of;
  std::map<SeqId, FinishReason> terminated;  // terminate() returned true
  std::map<SeqId, int32_t> preemptions;
  std::map<SeqId, std::unique_ptr<Sequence>> finished;
  std::vector<SeqId> first_admissions;
  std::set<SeqId> ever_scheduled;
  int64_t prefill_tokens = 0;

  auto process = [&](StepResult result) {
    for (SampledToken& row : result.tokens) {  // poison every row that must not be committed
      const Sequence* seq = scheduler.find(row.seq_id);
      if (seq == nullptr || seq->is_finished() || seq->termination_pending() || seq->epoch() != row.epoch) {
        row.token_id = kPoison;
      }
    }
    scheduler.process(result);
    scheduler.check_invariants();
  };
  auto collect = [&] {
    for (auto& seq : scheduler.take_finished()) finished.emplace(seq->id(), std::move(seq));
  };

  size_t next_request = 0;
  const int64_t max_steps = 20'000;
  for (int64_t step = 0;; ++step) {
    if (step > max_steps) fail("no progress after " + std::to_string(max_steps) + " steps");
    while (next_request < w.requests.size() && w.requests[next_request].arrival_step <= step) {
      const Request& r = w.requests[next_request];
      const SeqId id = scheduler.add_request("r" + std::to_string(next_request), r.prompt, r.params);
      ids[next_request] = id;
      index_of[id] = next_request;
      ++next_request;
    }
    if (!ids.empty() && rng.chance(w.cancel_rate)) {
      const SeqId id = ids[static_cast<size_t>(rng.uniform(0, static_cast<int32_t>(ids.size()) - 1))];
      const FinishReason reason = rng.chance(0.8) ? FinishReason::kAbort : FinishReason::kStop;
      const bool live = scheduler.find(id) != nullptr && !scheduler.find(id)->is_finished();
      const bool had_pending = live && scheduler.find(id)->termination_pending();
      const bool accepted = reason == FinishReason::kAbort ? scheduler.cancel(id) : scheduler.terminate(id, reason, "stop string");
      if (accepted != live) fail("cancel() returned " + std::to_string(accepted) + " for seq " + std::to_string(id));
      if (accepted && !had_pending) {
        terminated.emplace(id, reason);
        ++stats.cancels;
        if (scheduler.find(id) != nullptr && !scheduler.find(id)->is_finished()) ++stats.pending_cancels;
      }
      scheduler.check_invariants();
    }
    if (!scheduler.has_unfinished() && next_request == w.requests.size()) break;
    SchedulerOutput out = scheduler.schedule();
    scheduler.check_invariants();
    check_output(scheduler, out, step, first_admissions, ever_scheduled);
    for (SeqId id : out.preempted) ++preemptions[id];
    if (out.kind == StepKind::kPrefill) prefill_tokens += out.num_batched_tokens;
    if (auto result = executor.execute(out)) process(std::move(*result));
    collect();
    ++stats.steps;
  }
  while (auto result = executor.flush()) process(std::move(*result));
  collect();

  // Every request finished with the right reason and tokens; pools are full again.
  if (scheduler.has_unfinished() || scheduler.num_unprocessed_steps() != 0) fail("unfinished work at the end");
  if (scheduler.block_snapshot().num_used != 0 || scheduler.slot_snapshot().num_used != 0) fail("pools not full");
  int64_t committed = 0;
  for (const auto& [index, id] : ids) {
    const Request& r = w.requests[index];
    auto it = finished.find(id);
    if (it == finished.end()) fail("request " + std::to_string(index) + " never finished");
    const Sequence& seq = *it->second;
    const std::vector<int32_t> outputs(seq.output_token_ids().begin(), seq.output_token_ids().end());
    committed += seq.num_output_tokens();
    const std::string who = "request " + std::to_string(index) + " (seq " + std::to_string(id) + "): ";
    const int32_t max_len = scheduler.max_len();
    const bool bad = r.params.validation_error() != "" || r.prompt.empty() || static_cast<int32_t>(r.prompt.size()) + 1 > max_len;
    if (bad) {
      if (seq.finish_reason() != FinishReason::kError || !outputs.empty()) fail(who + "expected error");
      ++stats.errors;
      continue;
    }
    const auto expected = expected_run(r.prompt, r.params, w.options.eos_token_id, max_len, w.vocab_size);
    if (auto t = terminated.find(id); t != terminated.end()) {
      if (seq.finish_reason() != t->second) fail(who + "expected the termination reason");
      if (outputs.size() >= expected.outputs.size() || !std::equal(outputs.begin(), outputs.end(), expected.outputs.begin())) {
        fail(who + "terminated tokens are not a strict prefix of the oracle stream");
      }
    } else {
      if (seq.finish_reason() != expected.reason) {
        fail(who + "finish reason " + std::string(finish_reason_name(seq.finish_reason())) + ", expected " +
             std::string(finish_reason_name(expected.reason)));
      }
      if (outputs != expected.outputs) fail(who + "tokens differ from the oracle stream");
    }
    if (seq.metrics().num_preemptions != preemptions[id]) fail(who + "preemption count");
    if (seq.num_output_tokens() > 0 && seq.metrics().first_token_step < 0) fail(who + "no first-token step");
  }
  const MetricsTotals& totals = scheduler.metrics().totals();
  if (totals.num_committed_tokens != committed) fail("committed token count");
  if (totals.num_prefill_tokens != prefill_tokens) fail("prefill token count");
  stats.preemptions += totals.num_preemptions;
  stats.discarded += totals.num_discarded_results;
  stats.tokens += committed;
  ++stats.workloads;
}

int64_t env_int(const char* name, int64_t fallback) {
  const char* value = std::getenv(name);
  return value == nullptr ? fallback : std::stoll(value);
}

TEST(LifecycleRandomTest, ThousandsOfWorkloadsKeepEveryInvariant) {
  const int64_t only_seed = env_int("DEEPINFER_ENGINE_SEED", -1);
  const int64_t count = only_seed >= 0 ? 1 : env_int("DEEPINFER_ENGINE_WORKLOADS", 4000);
  Stats stats;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t seed = only_seed >= 0 ? static_cast<uint64_t>(only_seed) : static_cast<uint64_t>(i);
    const Workload w = make_workload(seed);
    try {
      run_workload(w, stats);
    } catch (const std::exception& e) {
      FAIL() << "workload seed " << seed << " failed: " << e.what() << "\n  " << w.describe()
             << "\n  replay: DEEPINFER_ENGINE_SEED=" << seed << " build/tests/engine_core_tests --gtest_filter='LifecycleRandomTest.*'";
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "[ workloads ] %lld workloads, %lld steps, %lld tokens, %lld preemptions, %lld stale results "
      "discarded, %lld terminations (%lld waited for a step in flight), %lld error requests, %.2f s\n",
      static_cast<long long>(stats.workloads), static_cast<long long>(stats.steps), static_cast<long long>(stats.tokens),
      static_cast<long long>(stats.preemptions), static_cast<long long>(stats.discarded), static_cast<long long>(stats.cancels),
      static_cast<long long>(stats.pending_cancels), static_cast<long long>(stats.errors), seconds);
  if (only_seed < 0 && count >= 1000) {  // the workloads must actually reach the hard paths
    EXPECT_GT(stats.preemptions, 100);
    EXPECT_GT(stats.discarded, 100);
    EXPECT_GT(stats.pending_cancels, 20);
    EXPECT_GT(stats.errors, 20);
  }
}

}  // namespace
}  // namespace deepinfer::engine
