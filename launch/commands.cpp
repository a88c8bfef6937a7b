#include "launch/commands.h"

#include <cstdio>
#include <stdexcept>

#include "io/output_verify.h"
#include "launch/args.h"

namespace deepinfer::launch {

int verify_command(int argc, char** argv) {
  Args args(argc, argv, 2, {}, {});
  if (args.positionals().size() != 2) throw std::invalid_argument("usage: deepinfer verify DIR_A DIR_B");
  const auto report = io::verify_output_dirs(args.positionals()[0], args.positionals()[1]);
  std::fprintf(report.exit_code() == 0 ? stdout : stderr, "%s\n", report.message.c_str());
  return report.exit_code();
}

std::map<std::string, Command> all_commands() {
  return {
      {"verify", verify_command},
      {"generate", generate_command},
      {"init-model", init_model_command},
      {"bench", bench_command},
      {"bench-tokenizer", bench_tokenizer_command},
      {"cat", cat_command},
  };
}

}  // namespace deepinfer::launch
