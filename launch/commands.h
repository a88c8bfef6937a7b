#pragma once
// The subcommands of `deepinfer`. Each takes (argc, argv) with argv[1] the command name
// and returns the process exit code; errors are thrown and reported by main().

#include <functional>
#include <map>
#include <string>

namespace deepinfer::launch {

using Command = std::function<int(int argc, char** argv)>;

int verify_command(int argc, char** argv);
int generate_command(int argc, char** argv);
int init_model_command(int argc, char** argv);
int bench_command(int argc, char** argv);
int bench_tokenizer_command(int argc, char** argv);
int cat_command(int argc, char** argv);

std::map<std::string, Command> all_commands();

}  // namespace deepinfer::launch
