// `deepinfer cat DIR [--format jsonl|openai]`: every record of a finished job, in global input
// order, as JSONL on stdout: the records themselves, or OpenAI batch output lines
// (pipeline/openai_output.h). The ranks' results files are merged by the inverse of pipeline::OwnerRank:
// replaying the sharding with each record's num_prompt_tokens says whose record comes next.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/record_file.h"
#include "launch/args.h"
#include "launch/commands.h"
#include "pipeline/job_files.h"
#include "pipeline/openai_output.h"
#include "pipeline/sharding.h"

namespace deepinfer::launch {
namespace fs = std::filesystem;

namespace {

// The world size of the results files in DIR (all files must agree).
int results_world_size(const std::string& dir) {
  const std::regex pattern(R"(results-(\d{5})-of-(\d{5})\.jsonl\.zst(\.partial)?)");
  int world = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, m, pattern)) continue;
    if (m[3].matched) throw std::invalid_argument(dir + " holds an unfinished " + name + "; finish it with generate --resume");
    const int w = std::stoi(m[2].str());
    if (world != 0 && w != world)
      throw std::invalid_argument(dir + " mixes results of world sizes " + std::to_string(world) + " and " + std::to_string(w));
    world = w;
  }
  if (world == 0) throw std::invalid_argument(dir + " holds no results-*.jsonl.zst");
  return world;
}

// A record's "num_prompt_tokens" (records are written by pipeline/result_record.cpp).
int64_t prompt_tokens_of(const std::string& record) {
  static const std::string key = "\"num_prompt_tokens\":";
  const auto at = record.find(key);
  if (at == std::string::npos) throw std::runtime_error("cat: a record without num_prompt_tokens: " + record.substr(0, 200));
  return std::stoll(record.substr(at + key.size(), 24));
}

}  // namespace

int cat_command(int argc, char** argv) {
  Args args(argc, argv, 2, {"format"}, {});
  if (args.positionals().size() != 1) throw std::invalid_argument("usage: deepinfer cat DIR [--format jsonl|openai]");
  const std::string format = args.get_or("format", "jsonl");
  if (format != "jsonl" && format != "openai") throw std::invalid_argument("--format must be jsonl or openai, got '" + format + "'");
  const std::string dir = args.positionals()[0];
  if (std::error_code error; !fs::is_directory(dir, error)) throw std::invalid_argument(dir + " is not a directory (a job's --output)");
  const int world = results_world_size(dir);
  std::vector<std::unique_ptr<io::RecordReader>> readers;
  for (int rank = 0; rank < world; ++rank) {
    const fs::path path = fs::path(dir) / pipeline::results_file_name(rank, world);
    if (!fs::exists(path))
      throw std::invalid_argument("missing " + path.string() + " (rank " + std::to_string(rank) + " of " + std::to_string(world) + ")");
    readers.push_back(std::make_unique<io::RecordReader>(path.string(), /*recover=*/false));
  }
  std::string record;
  pipeline::OwnerRank owner(world);
  for (int64_t n = 1;; ++n) {
    // The owner of the next item is known before the item; its record tells the item's tokens.
    const int rank = owner.peek();
    if (!readers[static_cast<std::size_t>(rank)]->next(&record)) break;
    owner.next(prompt_tokens_of(record));
    const std::string line = format == "openai" ? pipeline::openai_batch_line(record, n) : record;
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fputc('\n', stdout);
  }
  for (int rank = 0; rank < world; ++rank)
    if (readers[static_cast<std::size_t>(rank)]->next(&record))
      throw std::runtime_error("rank " + std::to_string(rank) +
                               "'s results file has records past the end of the input order: the files are not one job's shards");
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace deepinfer::launch
