#include "engine/fake_executor.h"

#include "engine/check.h"

namespace deepinfer::engine {
namespace {

constexpr uint64_t kHashInit = 0x6a09e667f3bcc908ULL;

uint64_t mix64(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t feed(uint64_t hash, int32_t token_id) { return mix64(hash ^ static_cast<uint32_t>(token_id)); }

int32_t draw(uint64_t seed, int32_t length, uint64_t prefix_hash, int32_t probed_token, int32_t vocab_size) {
  uint64_t x = mix64(seed ^ mix64(prefix_hash + static_cast<uint32_t>(length)) ^ (uint64_t{static_cast<uint32_t>(probed_token)} << 17));
  return static_cast<int32_t>(x % static_cast<uint64_t>(vocab_size));
}

}  // namespace

FakeExecutor::FakeExecutor(Options options) : options_(options) {
  ENGINE_CHECK(options_.block_size >= 1 && options_.num_blocks >= 2 && options_.num_slots >= 2,
               "bad pool shape: block_size=", options_.block_size, " num_blocks=", options_.num_blocks, " num_slots=", options_.num_slots);
  ENGINE_CHECK(options_.vocab_size >= 1, "vocab_size must be >= 1, got ", options_.vocab_size);
  ENGINE_CHECK(options_.delay_steps == 0 || options_.delay_steps == 1, "delay_steps must be 0 or 1, got ", options_.delay_steps);
  slots_.resize(options_.num_slots);
  kv_.resize(static_cast<size_t>(options_.num_blocks) * options_.block_size);
}

int32_t FakeExecutor::probe_position(uint64_t seed, int32_t length) {
  ENGINE_CHECK(length >= 1, "probe_position needs length >= 1, got ", length);
  return static_cast<int32_t>(mix64(seed ^ (uint64_t{static_cast<uint32_t>(length)} << 32)) % static_cast<uint64_t>(length));
}

int32_t FakeExecutor::next_token(uint64_t seed, std::span<const int32_t> prefix, int32_t vocab_size) {
  ENGINE_CHECK(!prefix.empty(), "next_token needs a non-empty prefix");
  uint64_t hash = kHashInit;
  for (int32_t token : prefix) hash = feed(hash, token);
  const auto length = static_cast<int32_t>(prefix.size());
  return draw(seed, length, hash, prefix[probe_position(seed, length)], vocab_size);
}

std::optional<StepResult> FakeExecutor::execute(const SchedulerOutput& out) {
  held_.push_back(run(out));
  if (static_cast<int32_t>(held_.size()) <= options_.delay_steps) return std::nullopt;
  StepResult result = std::move(held_.front());
  held_.pop_front();
  return result;
}

std::optional<StepResult> FakeExecutor::flush() {
  if (held_.empty()) return std::nullopt;
  StepResult result = std::move(held_.front());
  held_.pop_front();
  return result;
}

StepResult FakeExecutor::run(const SchedulerOutput& out) {
  ENGINE_ASSERT(out.step >= next_step_, "executor got step ", out.step, " after step ", next_step_ - 1);
  next_step_ = out.step + 1;
  ENGINE_ASSERT((out.kind == StepKind::kIdle) == out.seqs.empty(), "step ", out.step, " kind ", step_kind_name(out.kind), " with ",
                out.seqs.size(), " rows");
  StepResult result{.step = out.step, .tokens = {}};
  int32_t num_tokens = 0;
  int32_t num_sampled = 0;
  for (const ScheduledSeq& row : out.seqs) {
    num_tokens += row.num_query_tokens;
    num_sampled += row.sample ? 1 : 0;
    run_row(out, row, result);
  }
  ENGINE_ASSERT(num_tokens == out.num_batched_tokens && num_sampled == out.num_sampled, "step ", out.step,
                " totals disagree with its rows");
  return result;
}

FakeExecutor::KvCell& FakeExecutor::cell(const ScheduledSeq& row, int32_t position) {
  const size_t index = static_cast<size_t>(position / options_.block_size);
  ENGINE_ASSERT(index < row.block_table.size(), "seq ", row.seq_id, " position ", position, " beyond its ", row.block_table.size(),
                " blocks");
  const int32_t block = row.block_table[index];
  ENGINE_ASSERT(block >= 1 && block < options_.num_blocks, "seq ", row.seq_id, " uses block ", block);
  return kv_[static_cast<size_t>(block) * options_.block_size + position % options_.block_size];
}

void FakeExecutor::run_row(const SchedulerOutput& out, const ScheduledSeq& row, StepResult& result) {
  const SeqId id = row.seq_id;
  ENGINE_ASSERT(row.num_query_tokens >= 1 && row.query_token_ids.size() == static_cast<size_t>(row.num_query_tokens), "seq ", id,
                " row has ", row.num_query_tokens, " query tokens and ", row.query_token_ids.size(), " ids");
  if (out.kind == StepKind::kDecode) {
    ENGINE_ASSERT(row.num_query_tokens == 1 && row.sample, "decode row of seq ", id, " must be 1 sampled token");
  }
  ENGINE_ASSERT(row.params != nullptr, "seq ", id, " row has no sampling params");
  ENGINE_ASSERT(row.state_slot >= 1 && row.state_slot < options_.num_slots, "seq ", id, " uses slot ", row.state_slot);
  SlotState& slot = slots_[row.state_slot];
  if (row.start_pos == 0) {
    slot = SlotState{.seq_id = id, .epoch = row.epoch, .num_tokens = 0, .hash = kHashInit};
  } else {
    ENGINE_ASSERT(slot.seq_id == id && slot.epoch == row.epoch && slot.num_tokens == row.start_pos, "seq ", id, " epoch ", row.epoch,
                  " continues slot ", row.state_slot, " at ", row.start_pos, " but the slot holds seq ", slot.seq_id, " epoch ", slot.epoch,
                  " at ", slot.num_tokens);
  }
  for (int32_t j = 0; j < row.num_query_tokens; ++j) {
    int32_t token = row.query_token_ids[j];
    if (token == kPendingToken) {
      auto it = last_sample_.find(id);
      ENGINE_ASSERT(
          out.kind == StepKind::kDecode && it != last_sample_.end() && it->second.step == out.step - 1 && it->second.epoch == row.epoch,
          "seq ", id, " asks for its pending token in step ", out.step, " but none was sampled in step ", out.step - 1, " with epoch ",
          row.epoch);
      token = it->second.token_id;
    }
    ENGINE_ASSERT(token >= 0, "seq ", id, " feeds token ", token, " at position ", row.start_pos + j);
    const int32_t position = row.start_pos + j;
    cell(row, position) = KvCell{.seq_id = id, .epoch = row.epoch, .token_id = token};
    slot.hash = feed(slot.hash, token);
    ++slot.num_tokens;
  }
  if (!row.sample) return;
  const int32_t length = slot.num_tokens;
  const int32_t probe = probe_position(row.params->seed, length);
  const KvCell& probed = cell(row, probe);
  ENGINE_ASSERT(probed.seq_id == id && probed.epoch == row.epoch, "seq ", id, " epoch ", row.epoch, " reads position ", probe,
                " written by seq ", probed.seq_id, " epoch ", probed.epoch);
  const int32_t token = draw(row.params->seed, length, slot.hash, probed.token_id, options_.vocab_size);
  last_sample_[id] = LastSample{.step = out.step, .epoch = row.epoch, .token_id = token};
  result.tokens.push_back(SampledToken{.seq_id = id, .epoch = row.epoch, .token_id = token});
}

}  // namespace deepinfer::engine
