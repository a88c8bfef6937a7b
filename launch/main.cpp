// deepinfer: the command-line entry point. The only place that catches and exits
// (launch/exit_code.h maps an error to its exit code).
#include <cstdio>
#include <functional>
#include <map>
#include <string>

#include "launch/commands.h"
#include "launch/exit_code.h"

namespace {

constexpr const char* kUsage =
    "usage: deepinfer COMMAND [options]\n"
    "commands:\n"
    "  generate --model DIR|random:CONFIG --input FILE [--input FILE ...] --output DIR\n"
    "           [--job configs/jobs/NAME.json] [--seed N] [--max-num-seqs N] [--max-num-batched-tokens N]\n"
    "           [--num-blocks N] [--max-model-len N] [--device auto|cpu|cuda] [--dtype auto|float32|bfloat16]\n"
    "           [--deadline SECONDS] [--resume] [--no-overlap] [--no-cuda-graphs] [--batch-invariant]\n"
    "           [--keep-fp8-linears]\n"
    "                    run a batch job (exit 0 done, 130 stopped by a signal: rerun with --resume)\n"
    "  bench --model DIR|random:CONFIG --num-prompts N --input-len A:B --output-len A:B [--json FILE] [--prompts-out FILE]\n"
    "        [--breakdown] [--kernel-busy] [--hbm-tbps 4.3] [--tflops 790] [job options]\n"
    "                    synthetic throughput benchmark (warm-up excluded); --kernel-busy (CUDA build): the share of\n"
    "                    the timed job's wall time in which a kernel ran (CUPTI), with memcpys and memsets apart\n"
    "  bench-tokenizer --tokenizer FILE [--input FILE] [--seconds N]\n"
    "                    tokenizer encode/decode MB/s on one core (built-in corpus unless --input)\n"
    "  init-model --config FILE --output DIR [--seed N] [--experts-fp4] [--fp8-linears] [--float32]\n"
    "                    write a deterministic random checkpoint (+ the tiny tokenizer.json when it fits)\n"
    "  verify A B        compare the deterministic files of two output directories\n"
    "                    (exit 0 identical, 1 different, 2 unreadable)\n"
    "  cat DIR [--format jsonl|openai]\n"
    "                    print all results of a job directory as JSONL, in global input order\n"
    "                    (merges the ranks' results files); openai: OpenAI batch output lines\n"
    "  help              this text\n";

}  // namespace

int main(int argc, char** argv) {
  using deepinfer::launch::Command;
  const std::map<std::string, Command> commands = deepinfer::launch::all_commands();
  if (argc < 2 || std::string(argv[1]) == "help" || std::string(argv[1]) == "--help") {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? deepinfer::launch::kExitBadArguments : 0;
  }
  auto it = commands.find(argv[1]);
  if (it == commands.end()) {
    std::fprintf(stderr, "deepinfer: unknown command '%s'\n%s", argv[1], kUsage);
    return deepinfer::launch::kExitBadArguments;
  }
  return deepinfer::launch::run_reporting_errors(argv[1], [&] { return it->second(argc, argv); });
}
