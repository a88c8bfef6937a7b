#pragma once
// How an error that reaches main() becomes an exit code and one line on stderr:
//   std::invalid_argument         -> 2  "deepinfer CMD: MESSAGE"                (bad arguments or input)
//   deepinfer::InternalError      -> 1  "deepinfer CMD: internal error: MESSAGE" (a bug: engine/check.h)
//   any other std::exception      -> 1  "deepinfer CMD: error: MESSAGE"
// Owns: that mapping. Does not own: the commands, or a multi-rank job's abort (mpi_session.h).

#include <exception>
#include <functional>
#include <string>

namespace deepinfer::launch {

inline constexpr int kExitError = 1;
inline constexpr int kExitBadArguments = 2;

// The exit code of an error under the mapping above (a multi-rank job aborts with it).
int exit_code_of(const std::exception& error);

// Runs `command` and returns its exit code; an exception is reported as above.
int run_reporting_errors(const std::string& name, const std::function<int()>& command);

}  // namespace deepinfer::launch
