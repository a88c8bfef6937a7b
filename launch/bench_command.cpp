// `deepinfer bench`: a synthetic offline-throughput benchmark over the real job path.
// Prompts are random token ids with lengths drawn uniformly from --input-len A:B (fixed seed),
// outputs have exactly --output-len A:B tokens (ignore_eos). A short warm-up job runs first on
// the same model runner and is excluded from the figures.
// Decode steps: each decode step processed right after another one is timed by the gap between
// the two, and set against its roofline floor (model/step_cost.h) at its batch and mean context:
// max(bytes / --hbm-tbps, FLOPs / --tflops), the H200's measured 4.3 TB/s and 790 TFLOP/s by
// default. --breakdown times the parts of the timed job's decode steps (engine/part_timer.h).
// --kernel-busy: the fraction of the timed job's wall time in which a kernel ran (CUPTI,
// engine/cuda/kernel_busy.h), with the memcpys and memsets apart, and the kernels by name (the
// top 25 printed, all in the JSON), CUDA graphs on or off.
#include <atomic>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <random>

#include "engine/cuda/kernel_busy.h"
#include "engine/model_runner.h"
#include "engine/part_timer.h"
#include "io/durable_file.h"
#include "io/json_writer.h"
#include "launch/commands.h"
#include "launch/job_setup.h"
#include "model/expert_parallel.h"
#include "model/step_cost.h"
#include "pipeline/manifest.h"

namespace deepinfer::launch {
namespace {

using Range = std::pair<int64_t, int64_t>;

constexpr int64_t kMaxPrompts = int64_t{1} << 22;       // --num-prompts, --warmup-prompts
constexpr int64_t kMaxPromptTokens = int64_t{1} << 28;  // num-prompts x longest prompt (the prompts file is built in memory)

// A:B (or A alone: A:A), whole decimal integers, 1 <= A <= B.
Range parse_range(const Args& args, const std::string& name) {
  const std::string text = args.get(name);
  const auto colon = text.find(':');
  const auto whole = [](std::string_view part, int64_t* value) {
    const auto [end, error] = std::from_chars(part.data(), part.data() + part.size(), *value);
    return !part.empty() && error == std::errc() && end == part.data() + part.size();
  };
  int64_t a = 0, b = 0;
  const std::string_view view(text);
  const bool parsed = colon == std::string::npos ? whole(view, &a) && whole(view, &b)
                                                 : whole(view.substr(0, colon), &a) && whole(view.substr(colon + 1), &b);
  if (parsed && a >= 1 && b >= a) return {a, b};
  throw std::invalid_argument("option --" + name + " = '" + text + "' must be A:B with 1 <= A <= B (whole numbers)");
}

// Writes the prompts file; returns the number of prompt and output tokens requested.
Range write_prompts(const std::string& path, int64_t n, Range in, Range out, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto draw = [&](int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1)); };
  std::string text;
  int64_t in_tokens = 0, out_tokens = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t len = draw(in.first, in.second), max_tokens = draw(out.first, out.second);
    io::JsonWriter w;
    w.begin_object().key("id").value("bench-" + std::to_string(i)).key("prompt_token_ids").begin_array();
    for (int64_t t = 0; t < len; ++t) w.value(draw(2, vocab - 1));
    w.end_array().key("max_tokens").value(max_tokens).key("ignore_eos").value(true).end_object();
    text += w.str() + "\n";
    in_tokens += len;
    out_tokens += max_tokens;
  }
  io::write_file_atomically(path, text);
  return {in_tokens, out_tokens};
}

// One benchmark: the model, the job settings and the workload.
struct Bench {
  std::string model;
  pipeline::JobConfig config;
  int64_t num_prompts = 0;
  Range input_len, output_len;
  int64_t warmup_prompts = 0;
  at::Device device = at::kCPU;
  at::ScalarType dtype = at::kFloat;
  double bytes_per_s = 4.3e12;  // --hbm-tbps
  double flops_per_s = 790e12;  // --tflops
  bool breakdown = false;
  bool kernel_busy = false;
};

// The timed job's decode steps against their roofline floors.
struct DecodeFigures {
  int64_t steps = 0;
  double ms = 0, floor_ms = 0, batch = 0, context = 0;
  double schedule_ms = 0, execute_ms = 0, process_ms = 0, wait_ms = 0;  // host time in the step loop, summed
  model::StepCost cost;                                                 // summed
};

// What the timed job measured.
struct BenchResult {
  pipeline::JobOutcome outcome;
  DecodeFigures decode;
  std::vector<engine::PartTimer::Row> parts;  // summed over part_steps
  int64_t part_steps = 0;
  engine::DecodeGraphs::Stats graphs;
  std::optional<engine::cuda::KernelBusy> kernel_busy;  // with --kernel-busy
};

// A StepTiming observer that times decode steps (the gap since the step processed before, when
// that one was a decode step too) and adds up their floors.
std::function<void(const pipeline::StepTiming&, double)> decode_timer(const Bench& b, const model::DecodeCost& cost, DecodeFigures& f) {
  auto previous = std::make_shared<std::pair<engine::StepKind, double>>(engine::StepKind::kIdle, 0.0);
  return [&b, &cost, &f, previous](const pipeline::StepTiming& t, double t_s) {
    if (t.kind == engine::StepKind::kDecode && previous->first == engine::StepKind::kDecode && t.num_seqs > 0) {
      const model::StepCost step = cost.step(t.num_seqs, static_cast<double>(t.context_tokens) / t.num_seqs);
      ++f.steps;
      f.ms += 1e3 * (t_s - previous->second);
      f.floor_ms += step.floor_ms(b.bytes_per_s, b.flops_per_s);
      f.batch += t.num_seqs;
      f.context += static_cast<double>(t.context_tokens) / t.num_seqs;
      f.schedule_ms += t.schedule_ms;
      f.execute_ms += t.execute_ms;
      f.process_ms += t.process_ms;
      f.wait_ms += t.wait_ms;
      f.cost.weight_bytes += step.weight_bytes;
      f.cost.state_bytes += step.state_bytes;
      f.cost.flops += step.flops;
    }
    *previous = {t.kind, t_s};
  };
}

Bench parse_bench(const Args& args) {
  Bench b;
  b.config = job_config_from(args);
  if (!args.has("num-prompts")) throw std::invalid_argument("missing required option --num-prompts");
  b.num_prompts = args.get_int("num-prompts", 0, 1, kMaxPrompts);
  b.input_len = parse_range(args, "input-len");
  b.output_len = parse_range(args, "output-len");
  // Every request must be able to run: a benchmark of error records measures nothing.
  if (b.input_len.second > b.config.max_model_len || b.output_len.second > b.config.max_model_len - b.input_len.second)  // no overflow
    throw std::invalid_argument("--input-len up to " + std::to_string(b.input_len.second) + " plus --output-len up to " +
                                std::to_string(b.output_len.second) + " tokens exceeds max_model_len " +
                                std::to_string(b.config.max_model_len) + ": such requests would only be error records");
  if (b.num_prompts * b.input_len.second > kMaxPromptTokens)  // <= 2^22 x 2^30 after the checks above
    throw std::invalid_argument("--num-prompts " + std::to_string(b.num_prompts) + " x --input-len up to " +
                                std::to_string(b.input_len.second) + " tokens is more than the " + std::to_string(kMaxPromptTokens) +
                                " prompt tokens a bench writes");
  b.warmup_prompts = args.get_int("warmup-prompts", std::min<int64_t>(b.num_prompts, b.config.max_num_seqs), 0, kMaxPrompts);
  b.device = resolve_device(b.config.device);
  b.dtype = resolve_dtype(b.config.dtype, b.device);
  b.model = args.get("model");
  b.bytes_per_s = args.get_double("hbm-tbps", 4.3, 1e-6) * 1e12;
  b.flops_per_s = args.get_double("tflops", 790.0, 1e-6) * 1e12;
  if (!(b.bytes_per_s > 0) || !(b.flops_per_s > 0)) throw std::invalid_argument("--hbm-tbps and --tflops must be positive");
  b.breakdown = args.flag("breakdown");
  b.kernel_busy = args.flag("kernel-busy");
  if (b.kernel_busy && !engine::cuda::KernelBusyMeter::available())
    throw std::invalid_argument("--kernel-busy needs the CUDA build (cmake -DDEEPINFER_CUDA=ON): CUPTI records the kernels");
  if (b.kernel_busy && !b.device.is_cuda())
    throw std::invalid_argument("--kernel-busy needs a CUDA device (--device cuda), not " + b.device.str());
  return b;
}

// The warm-up job (when asked for), then the timed one, on one model runner; the prompts and
// outputs live in a temporary directory (the timed prompts are copied to `prompts_out` if set).
// The temporary directory of a bench's prompts and outputs, removed however the bench ends
// (a signal included: the jobs stop and return).
class TempDirectory final {
 public:
  TempDirectory() {
    char pattern[] = "/tmp/deepinfer-bench-XXXXXX";
    if (!::mkdtemp(pattern)) throw std::runtime_error(std::string("cannot create a temporary directory: ") + std::strerror(errno));
    path_ = pattern;
  }
  ~TempDirectory() { io::remove_tree(path_.string()); }
  TempDirectory(const TempDirectory&) = delete;
  TempDirectory& operator=(const TempDirectory&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

BenchResult run_jobs(const Bench& b, const std::string& prompts_out, const std::atomic<bool>& stop_requested) {
  const pipeline::MemoryPlan plan = check_memory_plan(b.model, b.config, b.device, b.dtype);
  auto source = pipeline::load_model_source(b.model, b.dtype, b.device, b.config.seed, 0, 1, b.config.keep_fp8_linears);
  if (b.device.is_cuda()) {  // measured, beside the plan's count: what the loaded weights hold on the device
    std::fprintf(stderr, "weights on %s after load: %.3f GiB allocated (FP8 linears %s)\n", b.device.str().c_str(),
                 engine::cuda::device_memory(b.device).allocated / 1073741824.0, b.config.keep_fp8_linears ? "kept in FP8" : "dequantized");
  }
  const model::ModelConfig& model_config = source.weights->config();
  pipeline::EngineOptions engine = pipeline::engine_options(b.config, model_config, b.dtype, b.device);
  std::vector<model::LayerType> layer_types;
  for (int64_t l = 0; l < model_config.num_layers; ++l) layer_types.push_back(model_config.layer_type(l));
  engine::PartTimer timer(b.device, layer_types);
  if (b.breakdown) engine.runner.model.clock = &timer;
  std::optional<engine::cuda::KernelBusyMeter> meter;  // attached before the runner captures anything
  if (b.kernel_busy) meter.emplace();
  model::SingleRankCommunicator comm;
  engine::ModelRunner runner(*source.weights, comm, engine.runner);
  const model::DecodeCost cost(*source.weights, /*world_size=*/1);
  BenchResult result;

  const TempDirectory temp;
  const std::filesystem::path& dir = temp.path();
  auto run = [&](const std::string& name, int64_t n, Range out_len) {
    const std::string prompts = (dir / (name + ".jsonl")).string();
    write_prompts(prompts, n, b.input_len, out_len, model_config.vocab_size, name == "warmup" ? 1 : 0);
    pipeline::JobOptions job = job_options_for(b.config, model_config, engine);
    job.tokenizer = source.tokenizer;  // results get "text", as in a real job
    job.inputs = {prompts};
    job.output_dir = (dir / name).string();
    job.job_json = "{}";
    job.stop_requested = &stop_requested;
    if (name != "timed") return pipeline::GenerateJob(job, runner).run();
    job.on_step = decode_timer(b, cost, result.decode);
    if (meter) meter->start();
    pipeline::JobOutcome outcome = pipeline::GenerateJob(job, runner).run();
    if (meter) result.kernel_busy = meter->stop();
    return outcome;
  };
  if (b.warmup_prompts > 0 && run("warmup", b.warmup_prompts, {1, 16}).interrupted) {
    result.outcome.interrupted = true;
    return result;
  }
  timer.reset();
  result.outcome = run("timed", b.num_prompts, b.output_len);
  if (b.breakdown) {
    result.parts = timer.totals();
    result.part_steps = timer.steps();
  }
  result.graphs = runner.graph_stats();
  print_peak_memory(plan, b.device);
  if (!prompts_out.empty()) std::filesystem::copy_file(dir / "timed.jsonl", prompts_out, std::filesystem::copy_options::overwrite_existing);
  return result;
}

const char* dtype_name(at::ScalarType dtype) { return dtype == at::kBFloat16 ? "bfloat16" : "float32"; }

void print_decode(const Bench& b, const DecodeFigures& f) {
  if (f.steps == 0) {
    std::printf("Decode steps: none timed (no two decode steps in a row)\n");
    return;
  }
  const double n = static_cast<double>(f.steps);
  std::printf(
      "Decode steps: %ld timed, mean batch %.1f, mean context %.0f: mean %.3f ms; roofline floor %.3f ms (%.3f GB weights + %.3f GB "
      "state at %.2f TB/s, %.4f TFLOP at %.0f TFLOP/s); measured / floor = %.2fx\n",
      long(f.steps), f.batch / n, f.context / n, f.ms / n, f.floor_ms / n, f.cost.weight_bytes / n / 1e9, f.cost.state_bytes / n / 1e9,
      b.bytes_per_s / 1e12, f.cost.flops / n / 1e12, b.flops_per_s / 1e12, f.ms / f.floor_ms);
  std::printf(
      "Host per decode step: schedule %.3f ms, execute (stage and launch the forward) %.3f ms, process (commit tokens, records) %.3f ms, "
      "waiting for the device %.3f ms\n",
      f.schedule_ms / n, f.execute_ms / n, f.process_ms / n, f.wait_ms / n);
}

// Per part: ms per step (device time between its marks) and its share, by layer type.
void print_breakdown(const BenchResult& r) {
  std::map<model::ForwardPart, std::vector<const engine::PartTimer::Row*>> by_part;
  double total = 0;
  for (const auto& row : r.parts) {
    by_part[row.part].push_back(&row);
    total += row.ms;
  }
  const double steps = static_cast<double>(std::max<int64_t>(r.part_steps, 1));
  std::printf("Breakdown over %ld steps (device time per step, %.3f ms in all):\n", long(r.part_steps), total / steps);
  for (const auto& [part, rows] : by_part) {
    double ms = 0;
    std::string types;
    for (const auto* row : rows) {
      ms += row->ms;
      char text[64];
      std::snprintf(text, sizeof(text), "%s%s %.3f", types.empty() ? "" : ", ", row->layer_type.c_str(), row->ms / steps);
      types += text;
    }
    std::printf("  %-22s %9.3f ms %5.1f%%   (%s)\n", model::forward_part_name(part), ms / steps, 100.0 * ms / std::max(total, 1e-12),
                types.c_str());
  }
}

// One line: the kernels' share of the timed job's wall, then the memcpys' and memsets'.
void print_kernel_busy(const engine::cuda::KernelBusy& k) {
  const std::string dropped =
      k.dropped_records > 0 ? "; " + std::to_string(k.dropped_records) + " records dropped: the figures undercount" : "";
  std::printf("kernel busy: %.1f%% of %.2f s wall (%ld kernels, mean gap %.1f us); memcpy %.1f%% (%ld), memset %.1f%% (%ld)%s\n",
              100 * k.kernels.fraction, k.wall_s, long(k.kernels.count), k.kernels.mean_gap_us, 100 * k.memcpy.fraction,
              long(k.memcpy.count), 100 * k.memset.fraction, long(k.memset.count), dropped.c_str());
}

// Kernel time summed per kernel (concurrent kernels add up), so the shares sum to 100%.
double summed_kernel_s(const engine::cuda::KernelBusy& k) {
  double total = 0;
  for (const auto& t : k.top_kernels) total += t.total_s;
  return total;
}

// The kernels of the most device time: share, total, count (per step of the timed job), mean.
void print_top_kernels(const engine::cuda::KernelBusy& k, int64_t steps) {
  constexpr size_t kShown = 25;
  const double total = summed_kernel_s(k);
  std::printf("top kernels: %zu of %zu names; %.3f ms of kernel time summed per kernel over %ld kernels, %ld steps\n",
              std::min(kShown, k.top_kernels.size()), k.top_kernels.size(), 1e3 * total, long(k.kernels.count), long(steps));
  std::printf("  %6s %10s %9s %8s %9s  %s\n", "share", "total ms", "count", "/step", "mean us", "name");
  for (size_t i = 0; i < std::min(kShown, k.top_kernels.size()); ++i) {
    const auto& t = k.top_kernels[i];
    char per_step[32] = "-";
    if (steps > 0) std::snprintf(per_step, sizeof(per_step), "%.1f", static_cast<double>(t.count) / static_cast<double>(steps));
    std::printf("  %5.1f%% %10.3f %9ld %8s %9.2f  %s\n", 100 * t.total_s / std::max(total, 1e-12), 1e3 * t.total_s, long(t.count), per_step,
                t.mean_us, t.name.c_str());
  }
}

void print_figures(const Bench& b, const pipeline::JobOutcome& outcome) {
  const double s = std::max(outcome.elapsed_s, 1e-9);
  const double total_tps = (outcome.prompt_tokens + outcome.output_tokens) / s;
  std::printf("model: %s | hardware: %s | dtype: %s\n", b.model.c_str(), hardware_description(b.device).c_str(), dtype_name(b.dtype));
  std::printf(
      "workload: %ld prompts, input %ld:%ld, output %ld:%ld (ignore_eos), max_num_seqs %d, max_num_batched_tokens %d, "
      "warm-up %ld prompts excluded\n",
      long(b.num_prompts), long(b.input_len.first), long(b.input_len.second), long(b.output_len.first), long(b.output_len.second),
      b.config.max_num_seqs, b.config.max_num_batched_tokens, long(b.warmup_prompts));
  std::printf("Throughput: %.2f requests/s, %.2f total tokens/s, %.2f output tokens/s\n", outcome.requests_run / s, total_tps,
              outcome.output_tokens / s);
  std::printf("Mean TTFT: %.1f ms, mean TPOT: %.2f ms, elapsed %.2f s, steps %ld, preemptions %ld\n", outcome.mean_ttft_ms,
              outcome.mean_tpot_ms, outcome.elapsed_s, long(outcome.steps), long(outcome.preemptions));
}

// Padded decode steps (CUDA) over the warm-up and timed jobs: how many replayed a graph; and the
// arithmetic mode.
void print_graphs(const Bench& b, const engine::DecodeGraphs::Stats& g) {
  std::printf("Batch-invariant arithmetic: %s\n", b.config.batch_invariant ? "on (--batch-invariant)" : "off");
  if (!b.device.is_cuda()) return;
  std::printf("CUDA graphs: %s; padded decode steps: %ld replayed, %ld eager; %ld graphs captured (warm-up included)\n",
              b.config.cuda_graphs ? "on" : "off (--no-cuda-graphs)", long(g.replayed), long(g.eager), long(g.captured));
}

void write_activity(io::JsonWriter& w, const engine::cuda::DeviceActivity& a) {
  w.begin_object().key("count").value(a.count).key("busy_s").value(a.busy_s).key("fraction").value(a.fraction);
  w.key("mean_gap_us").value(a.mean_gap_us).end_object();
}

// Every kernel name; "per_step" over the timed job's steps (null when none).
void write_top_kernels(io::JsonWriter& w, const engine::cuda::KernelBusy& k, int64_t steps) {
  const double total = summed_kernel_s(k);
  w.key("top_kernels").begin_array();
  for (const auto& t : k.top_kernels) {
    w.begin_object().key("name").value(t.name).key("count").value(t.count).key("total_s").value(t.total_s);
    w.key("mean_us").value(t.mean_us).key("share").value(total > 0 ? t.total_s / total : 0.0).key("per_step");
    if (steps > 0)
      w.value(static_cast<double>(t.count) / static_cast<double>(steps));
    else
      w.null();
    w.end_object();
  }
  w.end_array();
}

// "kernel_busy": null without --kernel-busy.
void write_kernel_busy(io::JsonWriter& w, const std::optional<engine::cuda::KernelBusy>& k, int64_t steps) {
  w.key("kernel_busy");
  if (!k) {
    w.null();
    return;
  }
  w.begin_object().key("wall_s").value(k->wall_s).key("fraction").value(k->kernels.fraction);
  w.key("kernels");
  write_activity(w, k->kernels);
  w.key("memcpy");
  write_activity(w, k->memcpy);
  w.key("memset");
  write_activity(w, k->memset);
  w.key("dropped_records").value(k->dropped_records);
  write_top_kernels(w, *k, steps);
  w.end_object();
}

void write_json(const Bench& b, const BenchResult& result, const std::string& path) {
  const pipeline::JobOutcome& outcome = result.outcome;
  const DecodeFigures& f = result.decode;
  const double s = std::max(outcome.elapsed_s, 1e-9), n = static_cast<double>(std::max<int64_t>(f.steps, 1));
  io::JsonWriter w;
  w.begin_object().key("model").value(b.model).key("hardware").value(hardware_description(b.device));
  w.key("dtype").value(dtype_name(b.dtype)).key("num_prompts").value(b.num_prompts);
  w.key("input_len").begin_array().value(b.input_len.first).value(b.input_len.second).end_array();
  w.key("output_len").begin_array().value(b.output_len.first).value(b.output_len.second).end_array();
  w.key("max_num_seqs").value(b.config.max_num_seqs).key("max_num_batched_tokens").value(b.config.max_num_batched_tokens);
  w.key("warmup_prompts").value(b.warmup_prompts).key("elapsed_s").value(outcome.elapsed_s);
  w.key("requests_per_s")
      .value(outcome.requests_run / s)
      .key("total_tokens_per_s")
      .value((outcome.prompt_tokens + outcome.output_tokens) / s);
  w.key("output_tokens_per_s").value(outcome.output_tokens / s).key("input_tokens").value(outcome.prompt_tokens);
  w.key("output_tokens").value(outcome.output_tokens).key("mean_ttft_ms").value(outcome.mean_ttft_ms);
  w.key("mean_tpot_ms").value(outcome.mean_tpot_ms).key("preemptions").value(outcome.preemptions);
  w.key("decode_steps").value(f.steps).key("decode_mean_batch").value(f.batch / n).key("decode_mean_context").value(f.context / n);
  w.key("decode_step_ms")
      .value(f.ms / n)
      .key("decode_floor_ms")
      .value(f.floor_ms / n)
      .key("decode_roofline_ratio")
      .value(f.steps ? f.ms / f.floor_ms : 0.0);
  w.key("decode_host_schedule_ms").value(f.schedule_ms / n).key("decode_host_execute_ms").value(f.execute_ms / n);
  w.key("decode_host_process_ms").value(f.process_ms / n);
  w.key("decode_host_wait_ms").value(f.wait_ms / n);
  w.key("cuda_graphs").value(b.config.cuda_graphs).key("graph_replays").value(result.graphs.replayed);
  w.key("batch_invariant").value(b.config.batch_invariant);
  w.key("breakdown").begin_array();
  for (const auto& row : result.parts) {
    w.begin_object().key("part").value(model::forward_part_name(row.part)).key("layer_type").value(row.layer_type);
    w.key("ms_per_step").value(row.ms / static_cast<double>(std::max<int64_t>(result.part_steps, 1))).end_object();
  }
  w.end_array();
  write_kernel_busy(w, result.kernel_busy, outcome.steps);
  w.end_object();
  io::write_file_atomically(path, w.str() + "\n");
}

}  // namespace

int bench_command(int argc, char** argv) {
  auto value_options = job_value_options();
  value_options.insert({"model", "num-prompts", "input-len", "output-len", "json", "warmup-prompts", "prompts-out", "hbm-tbps", "tflops"});
  Args args(argc, argv, 2, value_options,
            {"no-overlap", "no-cuda-graphs", "batch-invariant", "keep-fp8-linears", "breakdown", "kernel-busy"});
  std::atomic<bool>& stop_requested = install_stop_handlers();
  const Bench bench = parse_bench(args);
  for (const char* option : {"json", "prompts-out"})  // before the run, not after it
    if (args.has(option)) check_output_file(option, args.get(option));
  const BenchResult result = run_jobs(bench, args.get_or("prompts-out", ""), stop_requested);
  if (result.outcome.interrupted) {
    std::fprintf(stderr, "stopped by a signal: no figures\n");
    return 130;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // figures reach a log line by line
  print_figures(bench, result.outcome);
  print_decode(bench, result.decode);
  print_graphs(bench, result.graphs);
  if (bench.breakdown) print_breakdown(result);
  if (result.kernel_busy) {
    print_kernel_busy(*result.kernel_busy);
    print_top_kernels(*result.kernel_busy, result.outcome.steps);
  }
  if (args.has("json")) write_json(bench, result, args.get("json"));
  return 0;
}

}  // namespace deepinfer::launch
