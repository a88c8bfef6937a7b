#include "launch/exit_code.h"

#include <cstdio>
#include <exception>
#include <stdexcept>

#include "engine/check.h"

namespace deepinfer::launch {

int run_reporting_errors(const std::string& name, const std::function<int()>& command) {
  try {
    return command();
  } catch (const InternalError& error) {
    std::fprintf(stderr, "deepinfer %s: internal error: %s\n", name.c_str(), error.what());
    return kExitError;
  } catch (const std::invalid_argument& error) {
    std::fprintf(stderr, "deepinfer %s: %s\n", name.c_str(), error.what());
    return kExitBadArguments;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "deepinfer %s: error: %s\n", name.c_str(), error.what());
    return kExitError;
  }
}

}  // namespace deepinfer::launch
