// `deepinfer bench-tokenizer`: encode and decode throughput of a tokenizer.json on one core.
// The corpus (--input FILE, else a built-in mix of prose, code, numbers and non-Latin text) is
// cut into lines and each line is one prompt, encoded without special tokens. The first encode
// pass starts with an empty BPE cache and is reported on its own ("cold"); the timed passes
// that follow repeat until --seconds have passed. Decode is measured two ways: a whole line at a
// time (Tokenizer::decode) and token by token through io::OutputText, which is what the job
// does for every committed token. MB = 10^6 bytes of text.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include "io/durable_file.h"
#include "io/output_text.h"
#include "io/tokenizer.h"
#include "launch/args.h"
#include "launch/commands.h"

namespace deepinfer::launch {
namespace {

using Clock = std::chrono::steady_clock;

std::string builtin_corpus() {
  static const char* const kPieces[] = {"The quick brown fox jumps over the lazy dog.",
                                        "In the morning the weather was cold,",
                                        "but in the afternoon it was warm",
                                        "and the people of the town went out to the market",
                                        "A language model reads a prompt and writes the next token.",
                                        "for (int i = 0; i < n; ++i) { total += values[i]; }",
                                        "def encode(text): return [vocab[p] for p in split(text)]",
                                        "std::vector<int32_t> ids = tokenizer->encode(prompt, true);",
                                        "12345 2024 3.14159 -0.5e-3 1,000,000 0x7fff",
                                        "你好，世界。日本語のテキストとカタカナ。",
                                        "한국어 텍스트",
                                        "Ελληνικά, русский, العربية, עברית, हिन्दी",
                                        "emoji 👍🏽 🤖 🇯🇵",
                                        "    indented line\twith tabs",
                                        "Hello, world!",
                                        "return the result of the function;"};
  std::mt19937 rng(7);
  std::string text;
  while (text.size() < (1u << 20)) {
    const int words = 3 + static_cast<int>(rng() % 8);
    for (int i = 0; i < words; ++i) text += std::string(i ? " " : "") + kPieces[rng() % std::size(kPieces)];
    text += "\n";
  }
  return text;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) return line.substr(line.find(':') + 2);
  }
  return "unknown CPU";
}

double seconds_since(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

// Runs pass() once, then again until `seconds` have passed; returns (passes, seconds).
template <typename Pass>
std::pair<int64_t, double> repeat_for(double seconds, Pass pass) {
  const auto start = Clock::now();
  int64_t passes = 0;
  do {
    pass();
    ++passes;
  } while (seconds_since(start) < seconds);
  return {passes, seconds_since(start)};
}

}  // namespace

int bench_tokenizer_command(int argc, char** argv) {
  Args args(argc, argv, 2, {"tokenizer", "input", "seconds"}, {});
  const std::string path = args.get("tokenizer");
  const double seconds = static_cast<double>(args.get_int("seconds", 3));
  if (seconds < 0) throw std::invalid_argument("--seconds must be >= 0");
  const auto tokenizer = io::Tokenizer::load(path);
  const std::string corpus = args.has("input") ? io::read_file(args.get("input")) : builtin_corpus();
  const std::vector<std::string> lines = lines_of(corpus);
  if (lines.empty()) throw std::invalid_argument("the corpus has no non-empty line");
  int64_t bytes = 0;
  for (const auto& line : lines) bytes += static_cast<int64_t>(line.size());

  std::vector<std::vector<int32_t>> ids(lines.size());
  const auto cold_start = Clock::now();
  for (std::size_t i = 0; i < lines.size(); ++i) ids[i] = tokenizer->encode(lines[i], /*add_special_tokens=*/false);
  const double cold_s = seconds_since(cold_start);
  int64_t tokens = 0;
  for (const auto& line_ids : ids) tokens += static_cast<int64_t>(line_ids.size());

  int64_t sink = 0;  // keeps the work observable
  const auto [encode_passes, encode_s] = repeat_for(seconds, [&] {
    for (const auto& line : lines) sink += static_cast<int64_t>(tokenizer->encode(line, false).size());
  });
  const auto [decode_passes, decode_s] = repeat_for(seconds, [&] {
    for (const auto& line_ids : ids) sink += static_cast<int64_t>(tokenizer->decode(line_ids).size());
  });
  const auto [stream_passes, stream_s] = repeat_for(seconds, [&] {
    for (const auto& line_ids : ids) {
      io::OutputText text(tokenizer, {});
      for (const int32_t id : line_ids) text.push(id);
      sink += static_cast<int64_t>(text.finish().size());
    }
  });

  const auto mb_per_s = [&](int64_t passes, double s) { return static_cast<double>(bytes) * passes / 1e6 / std::max(s, 1e-9); };
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::printf("tokenizer: %s (%d ids) | CPU: %s, one thread\n", path.c_str(), tokenizer->vocab_size(), cpu_model().c_str());
  std::printf("corpus: %s, %ld bytes in %zu lines, %ld tokens (%.2f bytes/token); each line encoded without special tokens\n",
              args.has("input") ? args.get("input").c_str() : "built-in mix (1 MiB)", long(bytes), lines.size(), long(tokens),
              static_cast<double>(bytes) / std::max<int64_t>(tokens, 1));
  std::printf("encode: %.2f MB/s (%.0f tokens/s) warm, %ld passes in %.2f s after one cold pass at %.2f MB/s (empty BPE cache)\n",
              mb_per_s(encode_passes, encode_s), static_cast<double>(tokens) * encode_passes / std::max(encode_s, 1e-9),
              long(encode_passes), encode_s, mb_per_s(1, cold_s));
  std::printf(
      "decode: %.2f MB/s per line (Tokenizer::decode), %.2f MB/s token by token (OutputText, as the job); "
      "%ld and %ld passes\n",
      mb_per_s(decode_passes, decode_s), mb_per_s(stream_passes, stream_s), long(decode_passes), long(stream_passes));
  if (sink == 42) std::printf("\n");
  return 0;
}

}  // namespace deepinfer::launch
